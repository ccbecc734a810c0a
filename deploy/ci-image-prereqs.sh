#!/usr/bin/env bash
# What CI does to build the image that a user's machine does not need to.
#
# Sourced by .ci/run before `make test` (`. deploy/ci-image-prereqs.sh`); it exports
# PAPERCLUB_BUILD_ARGS, PAPERCLUB_BUILD_NETWORK and PAPERCLUB_DOCKER for
# tests/test_container.py. Run on its own (`bash deploy/ci-image-prereqs.sh`) it prints them.
# Every step is skipped when it is already done, so a second run (or a second CI run on the
# same machine) costs a few seconds:
#   1. installs docker.io and debootstrap from Debian when absent, starts dockerd when no
#      engine answers (overlay2 storage; the containers use host networking);
#   2. when the Dockerfile's base image cannot be pulled (no Docker Hub here), builds a
#      stand-in with debootstrap: Debian bookworm with python3, python3-venv, pip and the
#      host's CA bundle (outbound HTTPS goes through a proxy whose CA is in the host's trust
#      store), imported under the base image's own name and reused on later runs;
#   3. when PyTorch's CPU index cannot be reached (PyPI's torch is the CUDA build), serves
#      the CPU torch wheel that lies on this machine as a PEP 503 index on 127.0.0.1, and
#      passes it as TORCH_INDEX (so the build runs with --network host).
# A user runs `docker build -f deploy/Dockerfile .` and needs none of this.
# Nothing here may make CI fail: on any error the container test skips and says why.

_pc_fail() {
    echo "ci-image-prereqs: $1"
    export PAPERCLUB_CONTAINER_SKIP="the image build could not be prepared here: $1"
}

_pc_prereqs() {
    local base torch_wheel_dir torch_port cache log
    base=$(sed -n 's/^ARG BASE_IMAGE=//p' deploy/Dockerfile)
    torch_wheel_dir=${PAPERCLUB_TORCH_WHEELS:-/opt/wheels}
    torch_port=${PAPERCLUB_TORCH_PORT:-8765}
    cache=${PAPERCLUB_CI_CACHE:-/var/cache/paperclub-ci}
    log="$cache/prereqs.log"
    mkdir -p "$cache" || return 1
    echo "ci-image-prereqs: log in $log"

    # 1. A Docker engine.
    if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null; then
        echo "ci-image-prereqs: installing docker.io and debootstrap"
        { timeout 300 apt-get update -q && DEBIAN_FRONTEND=noninteractive \
            timeout 600 apt-get install -y -q --no-install-recommends docker.io debootstrap; } >>"$log" 2>&1 \
            || { _pc_fail "apt-get install failed (see $log)"; return 1; }
    fi
    if ! timeout 20 docker info >/dev/null 2>&1; then
        echo "ci-image-prereqs: starting dockerd"
        # setsid: the daemon outlives this shell and is not in CI's process group.
        setsid dockerd >>"$cache/dockerd.log" 2>&1 </dev/null &
        local i
        for i in $(seq 60); do
            timeout 5 docker info >/dev/null 2>&1 && break
            sleep 1
        done
        timeout 20 docker info >/dev/null 2>&1 \
            || { _pc_fail "dockerd did not start (see $cache/dockerd.log)"; return 1; }
    fi

    # BuildKit (for the Dockerfile's secret mount): the client on the path may lack buildx,
    # while Debian's docker.io client (20.10) has BuildKit built in.
    local client=docker
    if ! docker buildx version >/dev/null 2>&1; then
        local v
        v=$(/usr/bin/docker version --format '{{.Client.Version}}' 2>/dev/null)
        if [ -n "$v" ] && [ "${v%%.*}" -lt 23 ] 2>/dev/null; then
            client=/usr/bin/docker
        else
            _pc_fail "no docker client with BuildKit (docker buildx is missing)"; return 1
        fi
    fi

    # 2. The base image, or a stand-in under its name.
    if docker image inspect "$base" >/dev/null 2>&1; then
        echo "ci-image-prereqs: base $base present"
    elif timeout 60 docker pull -q "$base" >>"$log" 2>&1; then
        echo "ci-image-prereqs: pulled $base"
    else
        echo "ci-image-prereqs: cannot pull $base; building a debootstrap stand-in (a few minutes)"
        local root="$cache/rootfs"
        rm -rf "$root"
        timeout 900 debootstrap --variant=minbase \
            --include=python3,python3-venv,python3-pip,ca-certificates \
            bookworm "$root" http://deb.debian.org/debian >>"$log" 2>&1 \
            || { _pc_fail "debootstrap failed (see $log)"; return 1; }
        # The proxy's CA: the host's bundle, as the stand-in's own update-ca-certificates
        # would not know the proxy's certificate.
        cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
        chroot "$root" apt-get clean >>"$log" 2>&1 || true
        rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/usr/share/doc \
            "$root"/usr/share/man "$root"/usr/share/locale
        tar -C "$root" -c . | docker import \
            -c 'ENV LANG=C.UTF-8' -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
            -c 'CMD ["python3"]' \
            -m "debootstrap stand-in for $base (ci-image-prereqs.sh)" - "$base" >>"$log" 2>&1 \
            || { _pc_fail "docker import failed (see $log)"; return 1; }
        rm -rf "$root"
        echo "ci-image-prereqs: stand-in $base imported"
    fi

    # 3. Where the build finds a CPU torch.
    local args=""
    if timeout 15 python3 -c 'import urllib.request as u; u.urlopen("https://download.pytorch.org/whl/cpu/torch/", timeout=10)' >/dev/null 2>&1; then
        echo "ci-image-prereqs: PyTorch's CPU index is reachable"
    else
        local torch_version wheel index
        torch_version=$(sed -n 's/^torch==\([^ ]*\).*/\1/p' deploy/requirements.lock)
        wheel=$(ls "$torch_wheel_dir"/torch-"$torch_version"-cp311-*.whl 2>/dev/null | head -1)
        [ -n "$wheel" ] || { _pc_fail "no torch $torch_version wheel in $torch_wheel_dir"; return 1; }
        index="$cache/torch-index"
        mkdir -p "$index/simple/torch"
        ln -sf "$wheel" "$index/simple/torch/"
        printf '<!DOCTYPE html><html><body><a href="%s">%s</a></body></html>\n' \
            "$(basename "$wheel")" "$(basename "$wheel")" >"$index/simple/torch/index.html"
        if ! timeout 5 python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$torch_port/simple/torch/', timeout=3)" >/dev/null 2>&1; then
            setsid python3 -m http.server "$torch_port" --bind 127.0.0.1 --directory "$index" \
                >>"$cache/torch-index.log" 2>&1 </dev/null &
            sleep 1
        fi
        args="--build-arg TORCH_INDEX=http://127.0.0.1:$torch_port/simple"
        echo "ci-image-prereqs: serving $(basename "$wheel") on 127.0.0.1:$torch_port"
    fi
    export PAPERCLUB_BUILD_ARGS="$args"
    export PAPERCLUB_BUILD_NETWORK=host
    export PAPERCLUB_DOCKER="$client"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -u
    cd "$(dirname "$0")/.."
    _pc_prereqs || exit 1
    echo "export PAPERCLUB_BUILD_ARGS='$PAPERCLUB_BUILD_ARGS' PAPERCLUB_BUILD_NETWORK=host PAPERCLUB_DOCKER=$PAPERCLUB_DOCKER"
else
    unset PAPERCLUB_CONTAINER_SKIP
    _pc_prereqs || echo "ci-image-prereqs: not ready; the container test will skip"
fi
