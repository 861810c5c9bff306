# SPDX-License-Identifier: MIT
# hoardfs in a container: built from this tree on Debian bookworm, run on
# bookworm-slim with only the runtime libraries.  The container needs
# /dev/fuse and the right to mount (Kubernetes: privileged; see docs/k8s/).
#
#   docker build -t hoardfs:0.1.0 .
#   docker run --rm --device /dev/fuse --cap-add SYS_ADMIN \
#       --security-opt apparmor=unconfined \
#       -e OBS_ACCESS_KEY_ID -e OBS_SECRET_ACCESS_KEY \
#       -v /mnt/nvme/hoardfs:/cache -v /mnt/datasets:/mnt/datasets:rshared \
#       hoardfs:0.1.0 -f --endpoint https://obs.cn-north-4.myhuaweicloud.com \
#       -o allow_other obs://my-bucket/datasets /mnt/datasets
#
# -f keeps hoardfs in the foreground as the container's main process; it
# unmounts on SIGTERM.  /cache, when it exists, is the default cache dir.

FROM debian:bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential pkg-config \
	libfuse3-dev libcurl4-openssl-dev libssl-dev libsqlite3-dev \
	libxml2-dev libjansson-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# bookworm has a merged /usr: the mount helper goes to /usr/sbin (= /sbin).
RUN make clean && make -j"$(nproc)" \
 && make install DESTDIR=/out PREFIX=/usr SBINDIR=/usr/sbin

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends fuse3 libfuse3-3 libcurl4 \
	libssl3 libsqlite3-0 libxml2 libjansson4 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/ /
RUN mkdir -p /cache && hoardfs --version
ENTRYPOINT ["/usr/bin/hoardfs"]
CMD ["--help"]
