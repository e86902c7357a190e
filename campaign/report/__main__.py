import sys

from campaign.report.cli import main

sys.exit(main(prog="python -m campaign.report"))
