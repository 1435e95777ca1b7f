#!/usr/bin/env bash
# Checks that cargo and rustc are on PATH and that rustc is at least the crate's
# rust-version (Cargo.toml); if not, says exactly how to get it with rustup and exits 1.
# Debian's packaged rustc (apt install rustc) is older than the crate needs: rustup it is.
set -euo pipefail
cd "$(dirname "$0")/.."

wanted=$(sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' Cargo.toml | head -n1)
[ -n "$wanted" ] || { echo "check-rust: no rust-version in Cargo.toml" >&2; exit 1; }

how_to_get_it() {
    cat >&2 <<MSG
check-rust: Oráculo needs Rust $wanted or later (Cargo.toml's rust-version); $1.
  Install it with rustup, the Rust project's installer (a user install, no sudo):
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --default-toolchain stable
    . "\$HOME/.cargo/env"
  or, with rustup already there:
    rustup update stable && rustup default stable
  Debian's own rustc package is older than $wanted: remove it (apt remove rustc cargo) if it
  shadows rustup's. Then run this command again.
MSG
    exit 1
}

command -v cargo >/dev/null 2>&1 || how_to_get_it "cargo is not on PATH"
command -v rustc >/dev/null 2>&1 || how_to_get_it "rustc is not on PATH"
have=$(rustc --version | awk '{print $2}')
# Compare as versions (1.94 < 1.100), ignoring a pre-release tail such as -nightly.
older=$(printf '%s\n%s\n' "${have%%-*}" "$wanted" | sort -V | head -n1)
if [ "$older" != "$wanted" ] && [ "${have%%-*}" != "$wanted" ]; then
    how_to_get_it "this rustc is $have"
fi
echo "check-rust: rustc $have (needs $wanted or later)" >&2
