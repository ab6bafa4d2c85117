//! A panic with system settings changed puts them back: release builds abort on panic, so no
//! guard's drop would run; the panic hook (`settings::crash`) restores from the journal. One
//! test in its own binary: the hook and the environment are process-wide.
use iolab::settings::{Change, Setting, Settings};

#[test]
fn a_panic_after_settings_changed_restores_them_from_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let gov = dir.path().join("sys/devices/system/cpu/cpu0/cpufreq");
    std::fs::create_dir_all(&gov).unwrap();
    std::fs::write(gov.join("scaling_governor"), "schedutil\n").unwrap();
    std::fs::write(gov.join("scaling_available_governors"), "performance schedutil\n").unwrap();
    iolab::settings::crash::install();
    let settings = Settings::new(dir.path().join("sys"), dir.path().join("journal.json"));
    let guard = settings.apply(&[Change::new(Setting::Governor, None, "performance")]).unwrap();
    assert_eq!(std::fs::read_to_string(gov.join("scaling_governor")).unwrap().trim(), "performance");
    let panicked = std::panic::catch_unwind(|| panic!("a bug while settings are changed"));
    assert!(panicked.is_err());
    // The hook ran during the panic, before any drop: as under panic = "abort".
    assert_eq!(std::fs::read_to_string(gov.join("scaling_governor")).unwrap().trim(), "schedutil");
    assert!(settings.left_changed().unwrap().is_none(), "the journal still lists the change");
    std::mem::forget(guard);
}
