"""The optional compiled kernels (docs/ARCHITECTURE.md, "Compiled kernels"): two small C
extensions, built when ``pip install`` finds a C compiler and Python's headers. They are
``optional``: when they cannot be built, setuptools says so and the install goes on, and
the package runs on the pure-Python definitions of the same functions
(``tokens/word_kernels.py``, ``context/unit_kernels.py``), with the same results."""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("tokenplane.tokens._words", ["src/tokenplane/tokens/_words.c"], optional=True),
    Extension("tokenplane.context._units", ["src/tokenplane/context/_units.c"], optional=True),
])
