"""The optional C extension; everything else about the package is in pyproject.toml.

``reward_plugins._speedups`` holds compiled twins of the tag scan, the SQuAD normalizer and the
n-gram matcher of ROUGE-N and chrF.
Without a C compiler the build skips it, and the package runs its pure-Python reference
implementations (same results, slower).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("reward_plugins._speedups", ["reward_plugins/_speedups.c"], optional=True)
    ]
)
