#!/usr/bin/env bash
# Builds the Containerfile's runtime stage around a release binary and checks the image:
# its size, user and entrypoint, then `oraculo --version`, an ingest of the sample campaign
# (mounted read-only at /campaign, as compose mounts the notes) and an extractive `ask`,
# each run inside the image. Prints every step's result and seconds; exits 1 on a failure.
#
# Usage: scripts/check-container.sh [BINARY]
#   BINARY   the oraculo binary to put in the image (default: $CARGO_TARGET_DIR/release/oraculo,
#            else target/release/oraculo)
# Environment:
#   ORACULO_MODELS            the embedded models' folder, mounted read-only at /data/models
#                             (default: ~/.local/share/oraculo/models; scripts/fetch-models.sh)
#   ORACULO_CONTAINER_CACHE   where the Debian base's root file system is kept between runs
#                             (default: /var/tmp/oraculo-container)
#
# Made for machines where no registry image can be pulled and `podman run` cannot start a
# container (hybrid cgroups): the Debian base is made from Debian's packages (debootstrap +
# podman import) under the name the Containerfile asks for, the image is built with
# `podman build --isolation chroot`, and commands run in it with `buildah run --isolation
# chroot`. The builder stage (the rust image) and the compose file's ollama service only run
# where images can be pulled: a user's Docker or Podman.
# Needs: podman, buildah, debootstrap (apt-get install podman buildah debootstrap), root.
set -euo pipefail
cd "$(dirname "$0")/.."

BINARY="${1:-${CARGO_TARGET_DIR:-target}/release/oraculo}"
MODELS="${ORACULO_MODELS:-$HOME/.local/share/oraculo/models}"
CACHE="${ORACULO_CONTAINER_CACHE:-/var/tmp/oraculo-container}"
BASE_IMAGE="docker.io/library/debian:bookworm-slim"
IMAGE="localhost/oraculo-check:latest"
QUESTION="¿Cuánto ofreció el archiduque al grupo por investigar las caravanas desaparecidas?"

log() { printf 'check-container: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

FAILED=0
# step NAME COMMAND...: runs COMMAND, printing ok/FAIL, the seconds it took and its last lines.
step() {
    local name="$1" started output status
    shift
    started=$(date +%s.%N)
    set +e
    output="$("$@" 2>&1)"
    status=$?
    set -e
    local seconds
    seconds=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    if ((status == 0)); then
        printf 'ok    %6s s  %s\n' "$seconds" "$name"
    else
        printf 'FAIL  %6s s  %s (exit %d)\n' "$seconds" "$name" "$status"
        FAILED=1
    fi
    if [[ -n "$output" ]]; then
        printf '%s\n' "$output" | tail -n "${STEP_LINES:-6}" | sed 's/^/        /'
    fi
    return "$status"
}

for tool in podman buildah; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool is missing (apt-get install podman buildah debootstrap)"
done
[[ -x "$BINARY" ]] || die "no binary at $BINARY: build it (cargo build --release --locked) or pass its path"
[[ -f "$MODELS/e5-small-q4.bin" ]] || die "no embedded model in $MODELS: run scripts/fetch-models.sh"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/oraculo-container.XXXXXX")"
CONTAINER=""
cleanup() {
    if [[ -n "$CONTAINER" ]]; then buildah rm "$CONTAINER" >/dev/null 2>&1 || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

# crun refuses to set rlimits on these machines; no default ulimits, no error.
printf '[containers]\ndefault_ulimits = []\n' >"$WORK/containers.conf"
export CONTAINERS_CONF="$WORK/containers.conf"

make_base() {
    if podman image exists "$BASE_IMAGE"; then
        echo "$BASE_IMAGE is present"
        return 0
    fi
    command -v debootstrap >/dev/null 2>&1 || { echo "debootstrap is missing"; return 1; }
    if [[ ! -x "$CACHE/rootfs/usr/bin/apt-get" ]]; then
        rm -rf "$CACHE/rootfs"
        mkdir -p "$CACHE"
        debootstrap --variant=minbase bookworm "$CACHE/rootfs" || return 1
    fi
    tar -C "$CACHE/rootfs" -c . | podman import - "$BASE_IMAGE"
}

# The runtime stage as the Containerfile writes it, with the binary copied from the build
# context instead of the builder stage: the same instructions a user's build runs.
runtime_stage() {
    awk '/^ARG RUNTIME_IMAGE=/ { print } /^FROM .* AS runtime$/ { on = 1 } on { print }' Containerfile \
        | sed 's#^COPY --from=builder /out/oraculo #COPY oraculo #' >"$WORK/Containerfile.runtime"
    grep -q '^COPY oraculo /usr/local/bin/oraculo$' "$WORK/Containerfile.runtime" \
        || { echo "the runtime stage no longer copies /out/oraculo from the builder"; return 1; }
    cp "$BINARY" "$WORK/oraculo"
    echo "runtime stage: $(grep -c . "$WORK/Containerfile.runtime") lines; binary $(du -h "$BINARY" | cut -f1)"
}

build() {
    podman build --isolation chroot --pull=never -t "$IMAGE" -f "$WORK/Containerfile.runtime" "$WORK"
}

inspect() {
    local size user entrypoint cmd
    size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
    user=$(podman image inspect --format '{{.Config.User}}' "$IMAGE")
    entrypoint=$(podman image inspect --format '{{json .Config.Entrypoint}}' "$IMAGE")
    cmd=$(podman image inspect --format '{{json .Config.Cmd}}' "$IMAGE")
    echo "size $(awk -v s="$size" 'BEGIN { printf "%.1f MB", s / 1e6 }') ($size bytes); user $user; entrypoint $entrypoint; cmd $cmd"
    [[ "$user" == "oraculo" ]] || { echo "expected the user oraculo"; return 1; }
    [[ "$entrypoint" == '["/usr/local/bin/oraculo"]' ]] || { echo "unexpected entrypoint"; return 1; }
}

# in_image ARGS...: the image's entrypoint with ARGS, as its user, the sample campaign at
# /campaign and the models at /data/models, both read-only.
in_image() {
    buildah run --isolation chroot \
        --volume "$PWD/eval/campaign:/campaign:ro" \
        --volume "$MODELS:/data/models:ro" \
        "$CONTAINER" -- /usr/local/bin/oraculo "$@"
}

user_inside() {
    local uid
    uid=$(buildah run --isolation chroot "$CONTAINER" -- id -u)
    echo "runs as uid $uid"
    [[ "$uid" != 0 ]]
}

ask_extractive() {
    local answer
    answer=$(in_image ask --extractive "$QUESTION")
    printf '%s\n' "$answer"
    grep -q 'Sesión 1' <<<"$answer"
}

echo "check-container: binary $BINARY; models $MODELS"
step "Debian base image ($BASE_IMAGE)" make_base || exit 1
step "runtime stage from the Containerfile" runtime_stage || exit 1
STEP_LINES=3 step "podman build --isolation chroot (runtime stage)" build || exit 1
step "image size, user, entrypoint" inspect || true
CONTAINER=$(buildah from --pull-never "$IMAGE")
step "non-root user inside" user_inside || true
step "oraculo --version" in_image --version || true
STEP_LINES=12 step "oraculo ingest --no-annotate (sample at /campaign, read-only)" in_image ingest --no-annotate || true
STEP_LINES=12 step "oraculo ask --extractive" ask_extractive || true
if ((FAILED)); then
    echo "check-container: FAILED"
    exit 1
fi
echo "check-container: all steps passed ($IMAGE)"
