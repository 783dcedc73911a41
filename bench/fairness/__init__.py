# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fair-sharing benchmark (issue 14): trace generator, offline ideal/static simulators, lab replay, summary."""
