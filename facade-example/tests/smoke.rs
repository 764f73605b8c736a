//! The example learns, survives a save/load, and predicts the same on the other backend.

#[test]
fn trains_saves_loads_and_moves_to_another_backend() {
    let dir = std::env::temp_dir().join(format!("facade-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let report = facade_example::run(&dir.join("model.safetensors")).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    println!("{report:?}");
    assert!(report.loss.1 < 0.5 * report.loss.0, "{report:?}");
    assert!(report.max_difference < 1e-4, "{report:?}");
    assert!(report.round_trip_exact, "{report:?}");
    if std::env::var_os("CI").is_some() {
        // CI installs PoCL: the move must have gone to OpenCL there.
        assert_eq!(report.moved_to, "opencl", "{report:?}");
    }
}
