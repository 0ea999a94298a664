
from crawler.moved import install as _install_moved

_install_moved()  # old module paths (crawler.netguard ...) still import, with a DeprecationWarning
