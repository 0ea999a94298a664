"""Pages whose content scripts build: ``-a render`` (``service.py``), the
browser (``browser.py``), the requests a rendered page makes (``router.py``)
and which pages are worth rendering (``decide.py``, pure)."""
