"""The package imports cheaply and exposes its public surface."""

import subprocess
import sys

import reward_plugins


def test_public_names() -> None:
    for name in reward_plugins.__all__:
        assert hasattr(reward_plugins, name), name


def test_import_does_not_pull_heavy_dependencies() -> None:
    code = (
        "import sys, reward_plugins; "
        "heavy = ('verl', 'ray', 'torch', 'nltk', 'pandas', 'trl'); "
        "heavy = [m for m in heavy if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
