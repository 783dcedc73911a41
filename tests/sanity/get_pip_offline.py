# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Offline stand-in for ansible-test's pip bootstrap script (normally downloaded from ci-files.testing.ansible.com,
# which this network cannot reach). `make sanity` copies it to ~/.ansible/test/cache/get_pip_<version>.py with
# VENV_SITE_PACKAGES filled in: it installs the requested pip into the sanity venv with the project venv's pip,
# from PyPI.
import sys

sys.path.insert(0, "VENV_SITE_PACKAGES")
from pip._internal.cli.main import main  # noqa: E402  pylint: disable=wrong-import-position

sys.exit(main(["install"] + [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]))
