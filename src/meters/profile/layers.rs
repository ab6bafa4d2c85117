//! The layers of the I/O stack a profile splits the CPU time into, kept as data: each with the
//! symbols (module names, function prefixes) in it, and the spin locks whose time is their caller's.

/// A layer of the stack and the symbols in it. The first rule that matches a frame wins: a
/// rule is a module name in brackets (`[nvme]`) or a prefix of the function name.
pub struct Layer {
    pub name: &'static str,
    pub rules: &'static [&'static str],
}

/// The map from kernel symbols to layers. Order matters: specific before general.
pub const LAYERS: &[Layer] = &[
    Layer {
        name: "idle",
        rules: &[
            "do_idle",
            "default_idle",
            "cpu_idle",
            "cpuidle",
            "poll_idle",
            "acpi_idle",
            "intel_idle",
            "arch_cpu_idle",
            "pv_native_safe_halt",
            "native_safe_halt",
            "mwait_idle",
        ],
    },
    Layer {
        name: "interrupt and softirq",
        rules: &[
            "asm_common_interrupt",
            "common_interrupt",
            "__common_interrupt",
            "handle_irq",
            "handle_edge_irq",
            "handle_fasteoi_irq",
            "__handle_irq",
            "irq_",
            "__irq",
            "__do_softirq",
            "handle_softirqs",
            "do_softirq",
            "__sysvec",
            "sysvec_",
            "asm_sysvec",
            "irqentry_",
        ],
    },
    Layer {
        name: "system call entry and exit",
        rules: &["entry_SYSCALL", "do_syscall_64", "syscall_exit", "syscall_enter", "__x64_sys_", "x64_sys_call", "__do_sys_", "__se_sys_"],
    },
    Layer {
        name: "io_uring",
        rules: &[
            "[io_uring]",
            "io_uring",
            // Every `__io_*` function is io_uring's (6.18's kallsyms: __io_read, __io_issue_sqe, ...).
            "__io_",
            "__io_uring",
            "io_submit_sqe",
            "io_issue_sqe",
            "io_queue_",
            "io_req_",
            "io_read",
            "io_write",
            "io_rw_",
            "io_do_iopoll",
            "io_iopoll",
            "io_cqring",
            "io_wq_",
            "io_worker",
            "io_sq_thread",
            "io_fill_cqe",
            "io_get_cqe",
            "io_poll_",
            "io_commit_cqring",
            "io_cq_",
            "io_import_",
            "io_prep_",
            "io_complete_rw",
            "io_uring_cmd",
            "io_submit_flush",
            "tctx_task_work",
            "io_handle_tw",
        ],
    },
    Layer {
        name: "libaio (kernel)",
        rules: &["aio_", "io_submit_one", "__io_submit_one", "read_events", "do_io_getevents", "lookup_ioctx"],
    },
    Layer { name: "I/O scheduler", rules: &["[mq-deadline]", "[kyber_iosched]", "[bfq]", "dd_", "kyber_", "bfq_", "deadline_"] },
    Layer {
        name: "page cache",
        rules: &[
            "filemap_",
            "__filemap_",
            "folio_",
            "__folio_",
            "page_cache_",
            "copy_page_to_iter",
            "copy_to_user",
            "copy_user_",
            "_copy_to_iter",
            "_copy_from_iter",
            "rep_movs_alternative",
            "__memcpy",
            "memcpy_orig",
            "generic_file_read_iter",
            "generic_perform_write",
            "find_get_",
            "pagecache_",
        ],
    },
    Layer {
        name: "file system",
        rules: &["[ext4]", "[xfs]", "[btrfs]", "[jbd2]", "ext4_", "__ext4_", "xfs_", "btrfs_", "jbd2_", "iomap_", "__iomap_"],
    },
    Layer {
        name: "VFS",
        rules: &[
            "vfs_",
            "ksys_",
            "do_iter_",
            "rw_verify_area",
            "__fdget",
            "fdget",
            "fput",
            "__fget",
            "do_preadv",
            "do_pwritev",
            "new_sync_",
            "blkdev_read_iter",
            "blkdev_write_iter",
            "blkdev_direct_IO",
            "__blkdev_direct_IO",
            "blkdev_iomap_begin",
            "blkdev_bio_end_io",
            "security_file_permission",
            "fsnotify",
        ],
    },
    Layer {
        name: "device driver",
        rules: &[
            "[nvme]",
            "[nvme_core]",
            "[virtio_blk]",
            "[zram]",
            "[loop]",
            "[null_blk]",
            "[virtio_pci]",
            "[virtio_ring]",
            "nvme_",
            "virtblk_",
            "virtio_queue_rq",
            "virtqueue_",
            "vring_",
            "vp_notify",
            "iowrite",
            "ioread",
            "__iowrite",
            "__ioread",
            "vm_notify",
            "zram_",
            "lo_",
            "loop_",
            "null_",
            "zs_",
            "lzo",
            "lz4",
            "zstd_",
        ],
    },
    Layer {
        name: "block layer",
        rules: &[
            "blk_",
            "__blk_",
            "bio_",
            "__bio_",
            "submit_bio",
            "__submit_bio",
            "iocb_bio_iopoll",
            "bdev_",
            "part_",
            "req_bio_endio",
            "elv_",
            "__elv_",
            "sbitmap_",
            "__sbitmap",
        ],
    },
    Layer {
        name: "scheduler and context switch",
        rules: &[
            "schedule",
            "__schedule",
            "pick_next",
            "finish_task_switch",
            "__switch_to",
            "try_to_wake_up",
            "wake_up",
            "__wake_up",
            "ttwu_",
            "enqueue_",
            "dequeue_",
            "update_curr",
            "update_load_avg",
            "hrtimer_",
            "__hrtimer",
            "tick_",
            "scheduler_tick",
            "sched_",
            "__sched",
            "context_switch",
            "prepare_task_switch",
            "io_schedule",
        ],
    },
];

/// Spin and rw locks and their slow paths: a sample in one is its caller's time, so a lock
/// counts in the layer that takes it. On 6.1 under QEMU, 32 % of a polled NVMe run's samples were
/// `_raw_spin_unlock` called by `nvme_queue_rq`, which holds the queue's lock around its doorbell
/// write (an MMIO write the emulator traps): the driver's time, not "rest of kernel".
pub const LOCKS: &[&str] = &[
    "_raw_spin_",
    "_raw_read_",
    "_raw_write_",
    "queued_spin_lock_slowpath",
    "native_queued_spin_lock_slowpath",
    "queued_read_lock_slowpath",
    "queued_write_lock_slowpath",
];

/// The layer of a kernel frame: `module` is the bracketed module from kallsyms, or None for
/// the core kernel. Unmatched kernel code is "rest of kernel".
pub fn kernel_layer(function: &str, module: Option<&str>) -> &'static str {
    for l in LAYERS {
        for r in l.rules {
            let hit = match r.strip_prefix('[').and_then(|m| m.strip_suffix(']')) {
                Some(m) => module == Some(m),
                None => function.starts_with(r),
            };
            if hit {
                return l.name;
            }
        }
    }
    "rest of kernel"
}
