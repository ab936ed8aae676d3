#!/usr/bin/env bash
# Initialise a demo vault and show memvault working on it, with the package's own CLI.
set -euo pipefail
vault="${1:-demo-vault}"
mv() { .venv/bin/memvault --vault "$vault" "$@"; }

echo "== memvault init $vault"
mv init
echo
echo "== remember a few things"
mv remember "The owner prefers short answers with the command first" --category preference --importance 0.8 --tags style
mv remember "The staging server is staging.example.org, deployed with make deploy" --category fact --tags infra
mv remember "Decided to keep the vault in git, pushed nightly" --category decision
echo
echo "== a task, a contact, a journal entry"
mv task add "Renew the TLS certificate" --priority high --due +7d --step "Run certbot" --step "Reload nginx" >/dev/null || true
mv contact add "Ada Lovelace" --relationship colleague --email ada@example.org --id telegram=123456 >/dev/null || true
mv journal add "Demo run of memvault" --section "Actions Taken"
echo
mv memories
mv task list
mv contact show telegram:123456
echo
echo "== index the vault (keywords at once, vectors with the bundled local model)"
mv index
echo
echo "== search in your own words (keywords and meaning, fused)"
mv search "where do we deploy test builds" --limit 3
echo
echo "== the context an agent gets at the start of a run"
mv context --query "renew the certificate" --budget 400
echo
mv status
echo
echo "The vault is at $vault; open it in Obsidian or run: .venv/bin/memvault --vault $vault --help"
