//! NVIDIA GPUs through NVML, loaded at run time (dlopen of libnvidia-ml.so.1, or the path in
//! IOLAB_NVML_LIB / the config): `nvmlDeviceGetTotalEnergyConsumption` (mJ since the driver
//! loaded, Volta and later) per GPU, summed over GPUs (disjoint devices) as scope `gpu`.
use super::{Channel, ChannelKind, EnergyError, Reading, Scope, Source};
use libloading::{Library, Symbol};
use std::ffi::{c_char, c_void, CStr};
use std::path::Path;

type Ret = i32;
const NVML_SUCCESS: Ret = 0;

pub struct Nvml {
    lib: Library,
    devices: Vec<*mut c_void>,
    channels: Vec<Channel>,
    libname: String,
}

// SAFETY: NVML handles are process-global and NVML is thread-safe; the handles are only used
// from the sampler thread that owns this value.
unsafe impl Send for Nvml {}

fn err_string(lib: &Library, r: Ret) -> String {
    // SAFETY: nvmlErrorString returns a static C string.
    unsafe {
        match lib.get::<unsafe extern "C" fn(Ret) -> *const c_char>(b"nvmlErrorString\0") {
            Ok(f) => {
                let p = f(r);
                if p.is_null() {
                    format!("NVML error {r}")
                } else {
                    format!("{} ({r})", CStr::from_ptr(p).to_string_lossy())
                }
            }
            Err(_) => format!("NVML error {r}"),
        }
    }
}

impl Nvml {
    /// Err: no NVML or no GPU that counts energy here (unsupported), or NVML failed (failed).
    pub fn open(lib_path: Option<&Path>) -> Result<(Nvml, Vec<String>), EnergyError> {
        let name = lib_path.map(|p| p.display().to_string()).unwrap_or_else(|| "libnvidia-ml.so.1".into());
        // SAFETY: loading NVML runs its (trusted, vendor) initialisers.
        let lib = unsafe { Library::new(&name) }
            .map_err(|e| EnergyError::Unsupported(format!("{name} not loadable (no NVIDIA driver/GPU): {e}")))?;
        let mut me = Nvml { lib, devices: Vec::new(), channels: Vec::new(), libname: name };
        let mut notes = Vec::new();
        // SAFETY: signatures as declared in nvml.h.
        unsafe {
            let init: Symbol<unsafe extern "C" fn() -> Ret> =
                me.lib.get(b"nvmlInit_v2\0").map_err(|e| EnergyError::Unsupported(format!("nvmlInit_v2: {e}")))?;
            let r = init();
            if r != NVML_SUCCESS {
                return Err(EnergyError::Failed(format!("nvmlInit_v2: {}", err_string(&me.lib, r))));
            }
            let count: Symbol<unsafe extern "C" fn(*mut u32) -> Ret> =
                me.lib.get(b"nvmlDeviceGetCount_v2\0").map_err(|e| EnergyError::Unsupported(format!("nvmlDeviceGetCount_v2: {e}")))?;
            let handle: Symbol<unsafe extern "C" fn(u32, *mut *mut c_void) -> Ret> = me
                .lib
                .get(b"nvmlDeviceGetHandleByIndex_v2\0")
                .map_err(|e| EnergyError::Unsupported(format!("nvmlDeviceGetHandleByIndex_v2: {e}")))?;
            let energy: Symbol<unsafe extern "C" fn(*mut c_void, *mut u64) -> Ret> =
                me.lib
                    .get(b"nvmlDeviceGetTotalEnergyConsumption\0")
                    .map_err(|e| EnergyError::Unsupported(format!("nvmlDeviceGetTotalEnergyConsumption: {e}")))?;
            let mut n = 0u32;
            let r = count(&mut n);
            if r != NVML_SUCCESS {
                return Err(EnergyError::Failed(format!("nvmlDeviceGetCount_v2: {}", err_string(&me.lib, r))));
            }
            let mut devs = Vec::new();
            for i in 0..n {
                let mut h: *mut c_void = std::ptr::null_mut();
                let r = handle(i, &mut h);
                if r != NVML_SUCCESS {
                    return Err(EnergyError::Failed(format!("GPU {i}: nvmlDeviceGetHandleByIndex_v2: {}", err_string(&me.lib, r))));
                }
                let mut mj = 0u64;
                let r = energy(h, &mut mj);
                if r != NVML_SUCCESS {
                    // Every GPU must count, or the gpu scope would under-count.
                    return Err(EnergyError::Unsupported(format!(
                        "GPU {i}: nvmlDeviceGetTotalEnergyConsumption: {} (needs Volta or later)",
                        err_string(&me.lib, r)
                    )));
                }
                devs.push(h);
                notes.push(format!("GPU {i}: {mj} mJ since driver load"));
            }
            if devs.is_empty() {
                return Err(EnergyError::Unsupported("NVML reports no GPUs".into()));
            }
            me.channels = (0..devs.len())
                .map(|i| Channel {
                    scope: Scope::Gpu,
                    label: format!("gpu{i}"),
                    kind: ChannelKind::Counter { scale_j: 1e-3, range: None, max_plausible_w: 5000.0 },
                })
                .collect();
            me.devices = devs;
        }
        Ok((me, notes))
    }
}

impl Drop for Nvml {
    fn drop(&mut self) {
        // SAFETY: balanced with nvmlInit_v2.
        unsafe {
            if let Ok(f) = self.lib.get::<unsafe extern "C" fn() -> Ret>(b"nvmlShutdown\0") {
                f();
            }
        }
    }
}

impl Source for Nvml {
    fn name(&self) -> &'static str {
        "nvml"
    }
    fn method(&self, _: Scope) -> String {
        format!("{} nvmlDeviceGetTotalEnergyConsumption (mJ counter), sum of {} GPU(s)", self.libname, self.devices.len())
    }
    fn channels(&self) -> &[Channel] {
        &self.channels
    }
    fn fast(&self) -> bool {
        true
    }
    fn read(&mut self) -> Vec<Result<Reading, EnergyError>> {
        // SAFETY: as in open.
        let energy: Result<Symbol<unsafe extern "C" fn(*mut c_void, *mut u64) -> Ret>, _> =
            unsafe { self.lib.get(b"nvmlDeviceGetTotalEnergyConsumption\0") };
        let Ok(energy) = energy else { return self.devices.iter().map(|_| Err(EnergyError::Failed("symbol vanished".into()))).collect() };
        self.devices
            .iter()
            .map(|&h| {
                let mut mj = 0u64;
                let r = unsafe { energy(h, &mut mj) };
                if r == NVML_SUCCESS {
                    Ok(Reading::Raw(mj as f64))
                } else {
                    Err(EnergyError::Failed(format!("nvml: {}", err_string(&self.lib, r))))
                }
            })
            .collect()
    }
}
