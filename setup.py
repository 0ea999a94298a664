"""The project's one compiled module; everything else is in pyproject.toml.

crawler/_fpcore.c is the fingerprints' arithmetic in C (crawler/duplicates/fingerprint.py
has the same in numpy, the reference and the fallback). It is optional: where
no C compiler is found the install goes on and the numpy code is used
(``python -m crawler.duplicates.fingerprint`` says which is in use).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("crawler._fpcore", ["crawler/_fpcore.c"], optional=True,
                             extra_compile_args=["-O3"])])
