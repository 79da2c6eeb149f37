#!/usr/bin/env bash
# Set up calbench on a Debian/Ubuntu machine: system packages (apt) and the Python package, in
# the project's own virtual environment .venv (never the system Python).
#   scripts/setup.sh          what the workflow needs (Fashion-MNIST from Debian, calbench[workflow])
#   scripts/setup.sh --test   also the test dependencies (SLURM + munge for the cluster test,
#                             headless Chromium for tests/report/test_report_browser.py)
# Then `. .venv/bin/activate` puts calbench, snakemake and pytest on PATH.
# Runs apt-get through sudo when not root; skips apt when it is unavailable (then install the
# listed packages yourself). Idempotent; prints nothing but errors and its last line.
set -euo pipefail
cd "$(dirname "$0")/.."

extra="workflow"
apt_pkgs=(dataset-fashion-mnist)
case "${1:-}" in
    "") ;;
    --test)
        extra="test"
        apt_pkgs+=(munge slurmctld slurmd slurm-client chromium)  # chromium: report browser test
        ;;
    *) echo "setup: unknown option '$1'; use no option (workflow) or --test" >&2; exit 2 ;;
esac

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
        # debconf's notes about a missing terminal are not errors: keep apt's output to a log
        if ! $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >.apt-setup.log 2>&1; then
            cat .apt-setup.log >&2
            exit 1
        fi
        rm -f .apt-setup.log
    else
        echo "setup: apt-get not found; install these system packages yourself: ${missing[*]}" >&2
    fi
fi

[[ -x .venv/bin/python ]] || python3 -m venv .venv
# pip warns once per package about index folders a machine-wide pip.conf names but the machine
# lacks ("Location 'file:///...' is ignored"): a note on the machine, not on this project
pip_install() {
    .venv/bin/python -m pip install -q --disable-pip-version-check "$@" 2>&1 \
        | { grep -v "^WARNING: Location 'file://.*' is ignored: it is neither a file nor a directory\.$" || true; } >&2
    return "${PIPESTATUS[0]}"
}
pip_install --upgrade pip
pip_install -e ".[${extra}]"
echo "setup: calbench installed in .venv with extra [${extra}]; run '. .venv/bin/activate'"
