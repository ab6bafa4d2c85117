//! A stored run record read back, typed: the parts of schema v1 (docs/json-schema.md) that the
//! store, analysis, report and studies use, each field defined once here and read by name.
//!
//! Lenient where [`RunRecord`](super::RunRecord) is not, because databases keep records written
//! by older iolabs and hand-made ones: every field may be missing or null, and a value of another
//! type (a string where a number belongs, an unknown status word) reads as unknown — `None`, or an
//! empty part — rather than refusing the record. A record that is not an object reads as empty.
use super::{Path, RunStatus};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};

/// Missing, null or of another type: the default (None, an empty part or list).
fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned + Default>(d: D) -> Result<T, D::Error> {
    Ok(Option::<serde_json::Value>::deserialize(d)?.and_then(|v| T::deserialize(v).ok()).unwrap_or_default())
}

/// Structs whose every field is read with [`lenient`] and defaults when absent.
macro_rules! lenient_structs {
    ($($(#[doc = $doc:literal])* pub struct $name:ident { $($(#[doc = $fdoc:literal])* $field:ident: $ty:ty,)* })*) => {
        $(
            $(#[doc = $doc])*
            #[derive(Clone, Debug, Default, PartialEq, Deserialize)]
            #[serde(default)]
            pub struct $name {
                $($(#[doc = $fdoc])* #[serde(deserialize_with = "lenient")] pub $field: $ty,)*
            }
        )*
    };
}

lenient_structs! {
    /// A run record as stored (`RunRecord` serialised).
    pub struct Record {
        schema_version: Option<u32>,
        status: Option<RunStatus>,
        error: Option<String>,
        spec: Spec,
        environment: Environment,
        /// Empty for a run that never reached its measured window.
        results: Results,
        cost: Cost,
        /// The energy report (`energy::record::EnergyRecord`); None when the record has none
        /// (recorded by an iolab without energy measurement).
        energy: Option<Energy>,
        completion_path: CompletionPath,
        /// A file-set run's set, creation and files (`record::fileset`); empty otherwise.
        fileset: FileSet,
        /// A run of a group run together (`record::group::GroupRecord`); empty alone.
        group: Group,
    }

    /// The record's `group`: its name, its members and this run's place among them.
    pub struct Group {
        id: Option<String>,
        members: Vec<String>,
        member: Option<u64>,
        start_delay_s: Option<f64>,
        window_unix_s: Vec<f64>,
    }

    /// The record's `fileset` (`record::fileset::FileSetRecord`).
    pub struct FileSet {
        files: Option<u64>,
        bytes: Option<u64>,
        create: FilePhase,
        measured: FilePhase,
        fsyncs: Option<u64>,
        /// A served run's NBD server over the measured phase (`meters::server::ServerWindow`).
        server: Served,
    }

    /// `meters::server::ServerWindow`: the back end that served, the requests and their CPU.
    pub struct Served {
        server: Option<String>,
        requests: ServedRequests,
        cpu_us_per_request: Option<f64>,
        connection_cpu_us_per_request: Option<f64>,
    }

    /// `meters::server::Requests`.
    pub struct ServedRequests {
        read: Option<u64>,
        write: Option<u64>,
        flush: Option<u64>,
        trim: Option<u64>,
    }

    /// One phase over a set's files: files and bytes done whole, seconds, each file's latency.
    pub struct FilePhase {
        files: Option<u64>,
        bytes: Option<u64>,
        seconds: Option<f64>,
        files_per_s: Option<f64>,
        file_lat_ns: Latency,
    }

    /// The job's file-set part (`plan::fileset::FileSet`); empty without one.
    pub struct FileSetSpec {
        files: Option<u64>,
        file_size: Option<String>,
        file_order: Option<String>,
        fsync: Option<String>,
        /// The NBD server back end the set was served through (S4.7).
        server: Option<String>,
    }

    /// The job (`plan::Job`).
    pub struct Spec {
        interface: Option<String>,
        submit: Option<String>,
        complete: Option<String>,
        rw: Option<String>,
        write_mix: Option<i64>,
        bs: Option<i64>,
        qd: Option<i64>,
        threads: Option<i64>,
        batch_submit: Option<i64>,
        batch_reap: Option<i64>,
        direct: Option<bool>,
        budget: Budget,
        /// As given (the store keeps it as JSON text).
        targets: Option<serde_json::Value>,
        /// The I/O scheduler the run set; None when it left the device's as it was.
        scheduler: Option<String>,
        /// `--numa`: local or a node's number; None when off (or before it existed).
        numa: Option<String>,
        /// `--fileset`: the file set's part; empty without one.
        fileset: FileSetSpec,
    }

    /// `plan::Budget`: "seconds", "ios" or "bytes", and how many; "seconds_or_ios" and
    /// "seconds_or_bytes" (whichever comes first) have an object of both for a value, read as
    /// None here.
    pub struct Budget {
        kind: Option<String>,
        value: Option<f64>,
    }

    pub struct Environment {
        iolab_version: Option<String>,
        hostname: Option<String>,
        kernel: Option<String>,
        cpu_model: Option<String>,
        cpu_count: Option<u64>,
        started_at_unix_s: Option<f64>,
        targets: Vec<Target>,
        placement: Placement,
        /// Each target device's settings as the run had them (`settings::Settings::snapshot`:
        /// `nvme_power` with the controller's power states, ...).
        device_settings: Vec<serde_json::Value>,
    }

    /// `meters::placement::NumaPlacement`: what the threads were pinned to.
    pub struct Placement {
        /// NUMA nodes on the machine.
        nodes: Option<u64>,
        node: Option<u64>,
    }

    /// A target as the run found it (`device::sysinfo::TargetInfo`).
    pub struct Target {
        kind: Option<String>,
        /// The block device behind it.
        device: Option<String>,
        model: Option<String>,
    }

    pub struct Results {
        window_s: Option<f64>,
        read: Direction,
        write: Direction,
        total: Direction,
        /// One point per second of the window; None where the record has no series at all.
        series: Option<Vec<SecondPoint>>,
        cpu: Cpu,
    }

    pub struct Direction {
        ios: Option<u64>,
        bytes: Option<u64>,
        iops: Option<f64>,
        bw_bytes_per_s: Option<f64>,
        errors: Option<u64>,
        lat_ns: Latency,
    }

    /// Nanoseconds; the record's quantiles are integers, read as f64 like the mean.
    pub struct Latency {
        mean: Option<f64>,
        p50: Option<f64>,
        p99: Option<f64>,
        p99_9: Option<f64>,
        p99_999: Option<f64>,
        max: Option<f64>,
    }

    pub struct SecondPoint {
        t: Option<f64>,
        read_iops: Option<f64>,
        write_iops: Option<f64>,
        mean_lat_ns: Option<f64>,
        p50_lat_ns: Option<f64>,
        p99_lat_ns: Option<f64>,
    }

    /// iolab's own process over the window.
    pub struct Cpu {
        cores: Option<f64>,
        user_ns_per_io: Option<f64>,
        system_ns_per_io: Option<f64>,
    }

    /// `meters::Cost`.
    pub struct Cost {
        classes: Vec<ClassCost>,
        system: SystemCost,
        accounting: Accounting,
        /// None when the record has no perf counters.
        counters: Option<Counters>,
        /// `--profile layers`; None when the run was not profiled so.
        profile: Option<LayerProfile>,
        /// `--profile stages`; None when the run was not traced.
        stages: Option<StageProfile>,
    }

    /// `meters::profile::LayerProfile`, or why there is none.
    pub struct LayerProfile {
        unavailable: Option<String>,
        samples: Option<u64>,
        /// Absent from records made before it was recorded.
        hardware: Option<Hardware>,
        layers: Vec<LayerShare>,
        /// Absent from records made before it was recorded.
        run: Option<RunCpu>,
        unprofiled: Option<Unprofiled>,
        /// `meters::flame::Flame`; absent from records made before it was recorded.
        flame: Option<Flame>,
    }

    /// `meters::flame::Flame`: the run's own samples as stacks, root first.
    pub struct Flame {
        samples: Option<u64>,
        frames: Vec<FlameFrame>,
        stacks: Vec<(Vec<u32>, u64)>,
        other_samples: Option<u64>,
    }

    pub struct FlameFrame {
        name: Option<String>,
        layer: Option<String>,
    }

    /// `meters::profile::Hardware`: the cycles group, or why the CPUs count none.
    pub struct Hardware {
        unavailable: Option<String>,
        /// Which memory event (loads, stores) the PMU refused and why, where it counted cycles.
        memory_unavailable: Option<String>,
    }

    /// `meters::profile::Unprofiled`: the same job run unprofiled just before.
    pub struct Unprofiled {
        iops: Option<f64>,
        mean_latency_ns: Option<f64>,
        iops_change: Option<f64>,
        mean_latency_change: Option<f64>,
    }

    /// `meters::profile::RunCpu`: the run's own CPU by space, module and function.
    pub struct RunCpu {
        samples: Option<u64>,
        user_share: Option<f64>,
        kernel_share: Option<f64>,
        ns_per_io: Option<f64>,
        modules: Vec<CpuPart>,
        functions: Vec<CpuPart>,
    }

    /// A module (with its layer) or a function of the run's CPU.
    pub struct CpuPart {
        space: Option<String>,
        module: Option<String>,
        layer: Option<String>,
        /// Functions only.
        function: Option<String>,
        share: Option<f64>,
        ns_per_io: Option<f64>,
    }

    pub struct LayerShare {
        layer: Option<String>,
        self_share: Option<f64>,
        self_ns_per_io: Option<f64>,
        /// Where the CPUs counted them (a PMU).
        self_cycles_per_io: Option<f64>,
        self_instructions_per_io: Option<f64>,
        /// Retired loads and stores per I/O, where the PMU counted them (HotStorage'22 Table 2).
        self_loads_per_io: Option<f64>,
        self_stores_per_io: Option<f64>,
    }

    /// `meters::stages::StageProfile`, or why there is none.
    pub struct StageProfile {
        unavailable: Option<String>,
        requests_matched: Option<u64>,
        requests_unmatched: Option<u64>,
        requests_completion_untraced: Option<u64>,
        end_to_end: Option<Stage>,
        stages: Vec<Stage>,
        iolab_p50_ns: Option<f64>,
        unprofiled: Option<Unprofiled>,
    }

    pub struct Stage {
        from: Option<String>,
        to: Option<String>,
        layer: Option<String>,
        requests: Option<u64>,
        p50_ns: Option<f64>,
        p99_ns: Option<f64>,
        mean_ns: Option<f64>,
        share: Option<f64>,
    }

    pub struct ClassCost {
        /// "workload", "kernel_helper", ...
        class: Option<String>,
        ctx_switches_per_io: Option<f64>,
    }

    pub struct SystemCost {
        busy_cores: Option<f64>,
    }

    pub struct Accounting {
        unaccounted_fraction: Option<f64>,
    }

    pub struct Counters {
        /// Why hardware counters could not be read, when they could not.
        hardware_unavailable: Option<String>,
        workload_per_io: PerIo,
        system_per_io: PerIo,
    }

    pub struct PerIo {
        instructions: Option<f64>,
        ipc: Option<f64>,
        cache_miss_rate: Option<f64>,
    }

    /// `energy::record::EnergyRecord`.
    pub struct Energy {
        /// Why nothing measured, when nothing did.
        reasons: Vec<String>,
        /// Per source and scope.
        sources: Option<Vec<EnergySource>>,
        /// A bare total without sources (hand-made records).
        joules: Option<f64>,
        /// I/Os and bytes per joule of the drive, the CPU and the system (`ComponentEfficiency`).
        efficiency: Vec<Efficiency>,
        /// The idle power measured per source and scope (`IdlePower`); empty without a baseline.
        idle_baseline: Vec<IdlePower>,
        /// Which baseline it is (`IdleTaken`): "once_per_sweep" or "per_run".
        idle_baseline_taken: Option<String>,
    }

    /// `energy::record::IdlePower`.
    pub struct IdlePower {
        source: Option<String>,
        scope: Option<String>,
        idle_watts: Option<f64>,
        coverage: Option<f64>,
    }

    /// `energy::record::ComponentEfficiency`.
    pub struct Efficiency {
        /// ssd, cpu or system.
        component: Option<String>,
        iops_per_joule: Option<f64>,
        bytes_per_joule: Option<f64>,
        iops_per_dynamic_joule: Option<f64>,
        bytes_per_dynamic_joule: Option<f64>,
    }

    pub struct EnergySource {
        scope: Option<String>,
        mean_watts: Option<f64>,
        /// Set by the energy layer only when the source covered enough of the window.
        iops_per_joule: Option<f64>,
        /// Mean power in each second of the window (the series' seconds); empty when the source
        /// gave none (older records).
        per_second_watts: Vec<Option<f64>>,
    }

    pub struct CompletionPath {
        requested: Option<String>,
        mechanism: Option<String>,
        expected: Option<Path>,
        observed: Option<Path>,
        fell_back: Option<bool>,
    }
}

impl Record {
    /// Read a stored record (the JSON value of a `RunRecord`); never fails.
    pub fn of(record: &serde_json::Value) -> Record {
        Record::deserialize(record).unwrap_or_default()
    }
}

impl Cost {
    /// The cost of one thread class ("workload" is iolab's worker threads).
    pub fn class(&self, name: &str) -> Option<&ClassCost> {
        self.classes.iter().find(|c| c.class.as_deref() == Some(name))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::energy::record::EnergyRecord;
    use crate::energy::{EnergyReport, SourceEnergy};
    use crate::engine::recorder::{new_histogram, Direction as Recorded};
    use crate::meters::{self, Accounting as WrittenAccounting, ClassCost as WrittenClass};
    use crate::record::{self, RunRecord};
    use serde_json::json;

    fn recorded(ios: u64, lat_ns: u64) -> Recorded {
        let mut lat = new_histogram();
        lat.record_n(lat_ns, ios).unwrap();
        Recorded { ios, bytes: ios * 4096, errors: 0, min_ns: lat_ns, max_ns: lat_ns, lat }
    }

    /// A record as `session::execute` writes it, with every part the readers use filled in.
    pub fn written() -> RunRecord {
        let mut job = crate::plan::Job::default();
        job.targets.paths = vec!["/dev/sda".into()];
        job.system.scheduler = Some("kyber".into());
        let per_io = meters::PerIo { instructions: Some(12_000.0), ipc: Some(1.5), cache_miss_rate: Some(0.02), ..Default::default() };
        let source = SourceEnergy {
            source: "rapl".into(),
            scope: "cpu_package".into(),
            method: "counter".into(),
            joules: 20.0,
            mean_watts: 10.0,
            window_s: 2.0,
            coverage: 1.0,
            largest_gap_s: 0.1,
            samples: 20,
            read_errors: 0,
            wraps: 0,
            iops_per_joule: Some(100.0),
            bytes_per_joule: Some(409_600.0),
            notes: vec![],
            per_second_watts: vec![Some(9.0), Some(11.0)],
        };
        RunRecord {
            schema_version: record::SCHEMA_VERSION,
            status: RunStatus::Ok,
            error: None,
            spec: job,
            environment: record::Environment {
                iolab_version: "0.1.0".into(),
                command_line: vec!["iolab".into(), "run".into()],
                hostname: Some("h".into()),
                kernel: "6.8.0".into(),
                cpu_model: Some("Some CPU".into()),
                cpu_count: 8,
                started_at_unix_s: 1.0,
                clock: None,
                targets: vec![crate::device::sysinfo::TargetInfo {
                    path: "/dev/sda".into(),
                    kind: "block".into(),
                    device: Some("sda".into()),
                    model: Some("Disk".into()),
                    ..Default::default()
                }],
                device_settings: vec![],
                settings_changed: vec![],
                user_space_driver: None,
                setup_not_applied: vec![],
                placement: None,
            },
            results: Some(record::Results {
                window_s: 2.0,
                read: record::direction(&recorded(2000, 50_000), 2.0),
                write: record::direction(&recorded(0, 0), 2.0),
                total: record::direction(&recorded(2000, 50_000), 2.0),
                series: vec![],
                cpu: record::cpu(&meters::cpu::Rusage { user_s: 0.1, system_s: 0.3, ..Default::default() }, 2.0, 2000),
                verify: None,
                ended_by: None,
                pace: None,
                thread_settings: None,
                steadystate: None,
            }),
            cost: Some(meters::Cost {
                window_s: 2.0,
                classes: vec![WrittenClass {
                    class: "workload",
                    threads: Some(1),
                    cpu_s: 0.4,
                    user_s: Some(0.1),
                    system_s: Some(0.3),
                    cores: 0.2,
                    ns_per_io: Some(200_000.0),
                    voluntary_ctx_switches: Some(1000),
                    involuntary_ctx_switches: Some(0),
                    ctx_switches_per_io: Some(0.5),
                }],
                system: Some(meters::SystemCost {
                    cpus: 8,
                    cpu: Default::default(),
                    busy_s: 1.0,
                    busy_cores: 0.5,
                    busy_ns_per_io: None,
                    iowait_by_cpu_s: Default::default(),
                }),
                accounting: Some(WrittenAccounting {
                    classes_s: 0.9,
                    busy_s: 1.0,
                    unaccounted_s: 0.1,
                    unaccounted_fraction: Some(0.1),
                    interrupt_context_s: 0.0,
                    unexplained_fraction: None,
                }),
                devices: vec![],
                interrupts_total: 0,
                interrupts_total_per_io: None,
                counters: Some(meters::Counters {
                    hardware_unavailable: None,
                    system_wide_unavailable: None,
                    workload: Default::default(),
                    workload_per_io: per_io.clone(),
                    system: Default::default(),
                    system_per_io: per_io,
                }),
                profile: None,
                stages: None,
            }),
            energy: Some(EnergyRecord {
                report: EnergyReport {
                    status: "measured".into(),
                    reasons: vec!["ipmi: no BMC".into()],
                    sources: vec![source],
                    window_s: 2.0,
                    window_start_unix_s: 1.0,
                    window_end_unix_s: 3.0,
                },
                idle_baseline: Some(vec![crate::energy::record::IdlePower {
                    source: "rapl".into(),
                    scope: "cpu_package".into(),
                    idle_watts: 4.5,
                    idle_window_s: 2.0,
                    coverage: 1.0,
                }]),
                idle_baseline_taken: Some(crate::energy::record::IdleTaken::PerRun),
                dynamic: vec![],
                efficiency: vec![],
            }),
            completion_path: record::CompletionPath {
                requested: "irq".into(),
                mechanism: "interrupt".into(),
                expected: Path::Interrupt,
                reason: None,
                observed: Some(Path::Polled),
                evidence: None,
                fell_back: false,
            },
            ring: None,
            fileset: None,
            group: None,
        }
    }

    #[test]
    fn a_written_record_reads_back_with_the_fields_readers_use() {
        let value = serde_json::to_value(written()).unwrap();
        assert_eq!((&value["status"], &value["completion_path"]["expected"]), (&json!("ok"), &json!("interrupt")));
        let r = Record::of(&value);
        assert_eq!((r.schema_version, r.status, r.error.as_deref()), (Some(1), Some(RunStatus::Ok), None));
        assert_eq!(r.spec.scheduler.as_deref(), Some("kyber"));
        let spec = &r.spec;
        assert_eq!(
            (spec.interface.as_deref(), spec.submit.as_deref(), spec.complete.as_deref()),
            (Some("psync"), Some("syscall"), Some("irq"))
        );
        assert!(spec.rw.is_some() && spec.bs.is_some() && spec.qd.is_some() && spec.threads.is_some() && spec.write_mix.is_some());
        assert!(spec.batch_submit.is_some() && spec.batch_reap.is_some() && spec.direct.is_some() && spec.targets.is_some());
        assert!(spec.budget.kind.is_some() && spec.budget.value.is_some());
        let env = &r.environment;
        assert_eq!(
            (env.hostname.as_deref(), env.kernel.as_deref(), env.iolab_version.as_deref()),
            (Some("h"), Some("6.8.0"), Some("0.1.0"))
        );
        assert_eq!(env.started_at_unix_s, Some(1.0));
        assert_eq!((env.cpu_model.as_deref(), env.cpu_count), (Some("Some CPU"), Some(8)));
        let target = &env.targets[0];
        assert_eq!((target.device.as_deref(), target.model.as_deref(), target.kind.as_deref()), (Some("sda"), Some("Disk"), Some("block")));
        let t = &r.results.total;
        assert_eq!(
            (r.results.window_s, t.ios, t.iops, t.bw_bytes_per_s, t.errors),
            (Some(2.0), Some(2000), Some(1000.0), Some(4096e3), Some(0))
        );
        // The mean comes from the histogram (within its 1 % buckets), the maximum is exact.
        assert!(t.lat_ns.mean.is_some_and(|m| (m - 50_000.0).abs() < 500.0) && t.lat_ns.max == Some(50_000.0));
        assert!(t.lat_ns.p50.is_some() && t.lat_ns.p99.is_some() && t.lat_ns.p99_9.is_some() && t.lat_ns.p99_999.is_some());
        assert_eq!((r.results.read.iops, r.results.write.iops, r.results.write.lat_ns.mean), (Some(1000.0), Some(0.0), None));
        assert_eq!(r.results.series, Some(vec![]));
        let cpu = &r.results.cpu;
        assert_eq!(
            (cpu.cores, cpu.user_ns_per_io.map(f64::round), cpu.system_ns_per_io.map(f64::round)),
            (Some(0.2), Some(50_000.0), Some(150_000.0))
        );
        assert_eq!(r.cost.class("workload").and_then(|c| c.ctx_switches_per_io), Some(0.5));
        assert_eq!((r.cost.system.busy_cores, r.cost.accounting.unaccounted_fraction), (Some(0.5), Some(0.1)));
        let k = r.cost.counters.as_ref().unwrap();
        assert_eq!(
            (k.hardware_unavailable.as_deref(), k.workload_per_io.instructions, k.system_per_io.ipc),
            (None, Some(12_000.0), Some(1.5))
        );
        assert_eq!(k.workload_per_io.cache_miss_rate, Some(0.02));
        let e = r.energy.as_ref().unwrap();
        assert_eq!((e.reasons.clone(), e.joules), (vec!["ipmi: no BMC".to_string()], None));
        let s = &e.sources.as_ref().unwrap()[0];
        assert_eq!((s.scope.as_deref(), s.mean_watts, s.iops_per_joule), (Some("cpu_package"), Some(10.0), Some(100.0)));
        assert_eq!(s.per_second_watts, vec![Some(9.0), Some(11.0)]);
        let i = &e.idle_baseline[0];
        assert_eq!((i.scope.as_deref(), i.idle_watts, i.coverage), (Some("cpu_package"), Some(4.5), Some(1.0)));
        assert_eq!(e.idle_baseline_taken.as_deref(), Some("per_run"));
        let p = &r.completion_path;
        assert_eq!(
            (p.requested.as_deref(), p.expected, p.observed, p.fell_back),
            (Some("irq"), Some(Path::Interrupt), Some(Path::Polled), Some(false))
        );
    }

    #[test]
    fn an_old_or_partial_record_reads_as_unknown() {
        let r = Record::of(&json!({"schema_version": 1, "status": "ok"}));
        assert_eq!((r.schema_version, r.status), (Some(1), Some(RunStatus::Ok)));
        assert_eq!(r, Record { schema_version: Some(1), status: Some(RunStatus::Ok), ..Default::default() });
        assert!(r.energy.is_none() && r.cost.counters.is_none() && r.results.series.is_none());
        // Nulls, values of another type and words iolab does not write read as unknown.
        let odd = Record::of(&json!({"status": "weird", "results": {"total": {"iops": "fast", "lat_ns": null}, "series": 3},
                                     "cost": null, "energy": "none", "completion_path": {"observed": "sideways", "fell_back": 1}}));
        assert_eq!((odd.status, odd.results.total.iops, odd.results.series.as_ref()), (None, None, None));
        assert_eq!((odd.energy, odd.completion_path.observed, odd.completion_path.fell_back), (None, None, None));
        assert_eq!(Record::of(&json!("not an object")), Record::default());
        assert_eq!(Record::of(&serde_json::Value::Null), Record::default());
    }
}
