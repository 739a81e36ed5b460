#!/bin/sh
# Builds the plugin and gives it the file name NCCL opens for NCCL_NET_PLUGIN=doorbell:
# Cargo writes target/release/libnccl_net_doorbell.so (a library name cannot hold a
# hyphen); this copies it to target/release/libnccl-net-doorbell.so (the SONAME is
# already that, see nccl-net/build.rs). With an argument, also copies it there.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
${CARGO:-cargo} build --release -p nccl-net
cp target/release/libnccl_net_doorbell.so target/release/libnccl-net-doorbell.so
echo "built $root/target/release/libnccl-net-doorbell.so"
if [ $# -gt 0 ]; then
    mkdir -p "$1"
    cp target/release/libnccl-net-doorbell.so "$1"/
    echo "copied to $1/libnccl-net-doorbell.so"
fi
