#!/usr/bin/env bash
# Set up calbench on a Debian/Ubuntu machine: system packages (apt) and the Python package (pip).
#   scripts/setup.sh          what the workflow needs (Fashion-MNIST from Debian, calbench[workflow])
#   scripts/setup.sh --test   also the test dependencies (SLURM + munge for the cluster test,
#                             headless Chromium for tests/report/test_report_browser.py)
# Runs apt-get through sudo when not root; skips apt when it is unavailable (then install the
# listed packages yourself). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

extra="workflow"
apt_pkgs=(dataset-fashion-mnist)
if [[ "${1:-}" == "--test" ]]; then
    extra="test"
    apt_pkgs+=(munge slurmctld slurmd slurm-client chromium)  # chromium: report browser test
fi

missing=()
for p in "${apt_pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    if command -v apt-get >/dev/null; then
        sudo=""
        [[ $(id -u) -eq 0 ]] || sudo="sudo"
        export DEBIAN_FRONTEND=noninteractive
        $sudo apt-get update -qq
        $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
    else
        echo "setup: apt-get not found; install these system packages yourself: ${missing[*]}" >&2
    fi
fi

python3 -m pip install -q --disable-pip-version-check -e ".[${extra}]"
echo "setup: calbench installed with extra [${extra}]"
