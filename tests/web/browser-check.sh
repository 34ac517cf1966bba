# Sourced by the browser tests (tests/web/run-e2e.sh, tests/demo/run-demo-e2e.sh):
#   browser_check TEST NODE_MODULES
# sets $chrome, or exits 77 (meson: SKIP) naming what is missing: chromium
# ($HF_CHROMIUM, default /usr/bin/chromium), node, or playwright-core
# (npm ci --prefix web).
browser_check() {
    chrome=${HF_CHROMIUM:-/usr/bin/chromium}
    why=
    if [ ! -x "$chrome" ]; then
        why="no chromium at $chrome (apt-get install chromium)"
    elif ! command -v node >/dev/null 2>&1; then
        why="no node on PATH (apt-get install nodejs)"
    elif [ ! -f "$2/playwright-core/package.json" ]; then
        why="no $2/playwright-core (run: npm ci --prefix web)"
    fi
    if [ -n "$why" ]; then
        echo "SKIP $1: $why"
        echo "SKIP $1: $why" >&2
        exit 77
    fi
}
