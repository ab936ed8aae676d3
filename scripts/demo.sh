#!/usr/bin/env bash
# Initialise a demo vault, show memvault working on it, then run the daemon on it
# (the embedded default: SQLite, FTS5, sqlite-vec and the bundled local model).
# Re-runnable: a second run finds the vault, the task and the contact already there.
# DEMO_NO_SERVE=1 stops before the daemon (the tests run that part twice);
# MEMVAULT names the memvault command (default .venv/bin/memvault).
set -euo pipefail
vault="${1:-demo-vault}"
memvault="${MEMVAULT:-.venv/bin/memvault}"
python="$(dirname "$memvault")/python"
[[ -x "$python" ]] || python=python3
mv() { "$memvault" --vault "$vault" "$@"; }

echo "== memvault init $vault"
mv init
echo
echo "== remember a few things"
mv remember "The owner prefers short answers with the command first" --category preference --importance 0.8 --tags style
mv remember "The staging server is staging.example.org, deployed with make deploy" --category fact --tags infra
mv remember "Decided to keep the vault in git, pushed nightly" --category decision
echo
echo "== a task, a contact, a journal entry (the task and the contact only once)"
mv task show "Renew the TLS certificate" >/dev/null 2>&1 ||
    mv task add "Renew the TLS certificate" --priority high --due +7d --step "Run certbot" --step "Reload nginx" >/dev/null
mv contact show "Ada Lovelace" >/dev/null 2>&1 ||
    mv contact add "Ada Lovelace" --relationship colleague --email ada@example.org --id telegram=123456 >/dev/null
mv journal add "Demo run of memvault" --section "Actions Taken"
echo
mv memories
mv task list
if [[ -n "${DEMO_NO_SERVE:-}" ]]; then
    exit 0
fi
echo
echo "== start the daemon: HTTP API, event stream, MCP at /mcp, watcher, embedding backfill"
log="$vault/.memvault/daemon.log"
(umask 077 && : >"$log")  # the owner's only, like the rest of .memvault
"$memvault" --vault "$vault" serve --log-format text 2>"$log" &  # $! is the daemon itself
daemon=$!
stop() { kill -TERM "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; }
trap stop EXIT
trap 'exit 130' INT TERM  # Ctrl-C or a kill: the EXIT trap stops the daemon
for _ in $(seq 150); do
    if mv serve --status >/dev/null 2>&1; then break; fi
    if ! kill -0 "$daemon" 2>/dev/null; then cat "$log"; exit 1; fi
    sleep 0.2
done
mv serve --status
echo
echo "== the CLI now goes through the daemon (no model load in the CLI)"
mv remember "The demo daemon answered this remember" --tags demo
echo
echo "== wait until the daemon has loaded the model and embedded every chunk"
# doctor --json (from the daemon) says whether the embedder is loaded and how many chunks wait.
embedded() {
    mv doctor --json 2>/dev/null | "$python" -c '
import json, sys
checks = {c["name"]: c for c in json.load(sys.stdin)["checks"]}
loaded = checks["embedder"]["details"]["loaded"]
pending = checks.get("pending_embeddings", {}).get("details", {}).get("pending", 1)
sys.exit(0 if loaded and pending == 0 else 1)'
}
ready=""
for _ in $(seq 300); do
    if embedded; then ready=1; break; fi
    sleep 0.2
done
if [[ -n "$ready" ]]; then
    echo "The model is loaded and every chunk has its vector."
else
    echo "The model is still loading; the search below may answer from keywords only."
fi
echo
echo "== search in your own words (keywords and meaning, fused)"
mv search "where do we deploy test builds" --limit 3
echo
echo "== the context an agent gets at the start of a run"
mv context --query "renew the certificate" --budget 400
echo
mv doctor
echo
port=$(sed -n 's/.*"port": \([0-9]*\).*/\1/p' "$vault/.memvault/daemon.json")
echo "The daemon serves $vault at http://127.0.0.1:$port (log: $log). Try:"
echo "  curl -H \"Authorization: Bearer \$(cat $vault/.memvault/token)\" http://127.0.0.1:$port/v1/poll"
echo "With a language model in $vault/.memvault/config.toml ([llm] provider, model, api_key_env):"
echo "  $memvault --vault $vault chat      # the memory-aware agent in the terminal"
echo "Open the vault in Obsidian; Ctrl-C stops the daemon."
wait "$daemon"
