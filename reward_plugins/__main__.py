"""``python -m reward_plugins``: the ``reward-plugins`` command."""

import sys

from reward_plugins.cli import main

sys.exit(main())
