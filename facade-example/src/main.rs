//! Trains the tiny model, saves, loads and moves it; prints what happened.

fn main() -> tessera::Result<()> {
    let path = std::env::temp_dir().join("facade-example.safetensors");
    let report = facade_example::run(&path)?;
    println!(
        "loss {:.4} -> {:.4}; moved to {}; predictions differ by at most {:.2e}",
        report.loss.0, report.loss.1, report.moved_to, report.max_difference
    );
    Ok(())
}
