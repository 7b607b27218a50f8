#!/bin/busybox sh
# The first process of a test VM (scripts/test-vm): /init of its initramfs, run by
# the statically linked busybox packed beside it.
#
# It loads the virtio and 9p modules packed from the kernel package, mounts the
# host's root read-only over 9p (tag "hostroot") as the new root, gives it proc,
# sys, dev and a cgroup hierarchy (v2 alone, or the v1 controllers plus an empty v2
# at /sys/fs/cgroup/unified, after systemd.unified_cgroup_hierarchy= on the kernel
# command line), tmpfs on /tmp, /run, /var/tmp, /dev/shm and writable overlays on
# /etc and /var, mounts the job share (tag "job") at /run/kubelet-kit-vm, binds
# back the paths those tmpfs hide that the job needs (its "keep" file), brings
# up loopback (the only network), moves the new root onto /, runs the job's
# job.sh there as root, writes the result line to the console and powers off.
#
# The console protocol, read by scripts/test-vm and tests/vm/vm.py:
#   @@KUBELET_KIT_VM_BEGIN uptime=SECONDS@@   before the job's first byte
#   @@KUBELET_KIT_VM_RESULT exit=N@@          after its last one
#   @@KUBELET_KIT_VM_ERROR message@@          the VM could not run the job

/bin/busybox --install -s /bin
export PATH=/bin

fail() {
    echo "@@KUBELET_KIT_VM_ERROR $*@@"
    sync
    poweroff -f
    sleep 10
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1

unified=1
for arg in $(cat /proc/cmdline); do
    case "$arg" in
        systemd.unified_cgroup_hierarchy=0) unified=0 ;;
    esac
done

while read -r module; do
    insmod "/modules/$module.ko" || fail "insmod $module failed"
done </modules/order

r=/newroot
mkdir -p $r
mount -t 9p -o ro,trans=virtio,version=9p2000.L,cache=loose,msize=512000 hostroot $r ||
    fail "cannot mount the host's root over 9p"
# A second view of it, which the tmpfs mounted below do not cover (see "keep").
mkdir -p /hostview
mount --bind $r /hostview || fail "cannot bind the host's root"

mount -t proc proc $r/proc || fail "mount proc"
mount -t sysfs sysfs $r/sys || fail "mount sysfs"
mount -t devtmpfs devtmpfs $r/dev || fail "mount devtmpfs"
mkdir -p $r/dev/pts $r/dev/shm
mount -t devpts -o newinstance,ptmxmode=0666 devpts $r/dev/pts 2>/dev/null
for d in /tmp /run /dev/shm; do
    mount -t tmpfs -o mode=1777 tmpfs $r$d || fail "mount tmpfs on $d"
done
chmod 755 $r/run

# Writable copies of /etc and /var over the read-only root, changes in memory only.
mkdir -p /overlay
mount -t tmpfs tmpfs /overlay
for d in /etc /var; do
    name=${d#/}
    mkdir -p /overlay/$name/upper /overlay/$name/work
    mount -t overlay overlay \
        -o "lowerdir=$r$d,upperdir=/overlay/$name/upper,workdir=/overlay/$name/work" $r$d ||
        echo "test-vm init: $d stays read-only (no overlay)"
done
mount -t tmpfs -o mode=1777 tmpfs $r/var/tmp || fail "mount tmpfs on /var/tmp"

job=$r/run/kubelet-kit-vm
mkdir -p $job
mount -t 9p -o trans=virtio,version=9p2000.L,cache=none,msize=512000 job $job ||
    fail "cannot mount the job share"

# Paths of this machine that a tmpfs above now hides (a checkout under /tmp, as a
# fresh clone often is), listed by scripts/test-vm in the job's "keep" file: each
# is bound back, read-only, from the second view of the host's root.
if [ -s $job/keep ]; then
    while read -r path; do
        [ -d "/hostview$path" ] || continue
        mkdir -p "$r$path"
        mount --bind "/hostview$path" "$r$path" || fail "cannot keep $path visible"
    done <$job/keep
fi

cg=$r/sys/fs/cgroup
if [ $unified = 1 ]; then
    mount -t cgroup2 -o nsdelegate cgroup2 $cg || fail "mount cgroup2"
else
    # As systemd lays v1 out: one hierarchy per controller, cpu and cpuacct (and
    # net_cls and net_prio) together, a symlink for each name, v2 empty beside them.
    mount -t tmpfs -o mode=755 tmpfs $cg || fail "mount tmpfs on /sys/fs/cgroup"
    controllers=$(awk 'NR > 1 && $4 == 1 { print $1 }' /proc/cgroups)
    for c in $controllers; do
        case "$c" in
            cpu | cpuacct) h=cpu,cpuacct ;;
            net_cls | net_prio) h=net_cls,net_prio ;;
            *) h=$c ;;
        esac
        if [ ! -d $cg/$h ]; then
            mkdir $cg/$h
            mount -t cgroup -o $h cgroup $cg/$h || fail "mount cgroup v1 $h"
        fi
        [ $c = $h ] || ln -s $h $cg/$c
    done
    mkdir $cg/unified
    mount -t cgroup2 -o nsdelegate cgroup2 $cg/unified || fail "mount cgroup2 on unified"
fi

hostname kubelet-kit-vm
# No network, but loopback: local servers (a test registry, gRPC on 127.0.0.1) need it.
ip link set lo up || fail "cannot bring up lo"
[ -f $job/job.sh ] || fail "no job.sh in the job share"

# The new root goes on top of / (as switch_root does) before the job is chrooted
# into it, so that it is the root of the mount namespace: a process that enters
# the namespace (setns, as runc exec and nsenter do) starts at its top mount on /,
# and a container's pivot_root leaves the container's root there. Merely chrooted
# into $r, such processes would land in the initramfs instead. This shell keeps
# the initramfs as its root and its busybox for the lines below.
cd $r || fail "cd $r"
mount --move . / || fail "cannot move the new root onto /"

read -r up _ </proc/uptime
echo "@@KUBELET_KIT_VM_BEGIN uptime=$up@@"
chroot . /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/sh /run/kubelet-kit-vm/job.sh </dev/null
rc=$?
echo "@@KUBELET_KIT_VM_RESULT exit=$rc@@"
sync
poweroff -f
sleep 10
