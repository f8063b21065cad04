"""`python -m pytest_llmperf ...` is the `llmperf` command."""

import sys

from pytest_llmperf.commands.cli import main

sys.exit(main())
