//! Running a measuring process (`tessera-bench` or a peer) and collecting the records it prints,
//! showing each one as it arrives.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::bench::record::{Output, Record};
use crate::process::display_command;
use crate::TaskResult;

/// Runs `cmd` (stdin closed, stderr passed through), parses its stdout line by line as JSON
/// [`Output`] and prints a progress line per record. Fails if it cannot start, prints a line
/// that is not JSON, or exits unsuccessfully.
pub fn collect(cmd: &mut Command) -> TaskResult<Output> {
    let shown = display_command(cmd);
    println!("    $ {shown}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("could not start `{shown}`: {e}"))?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut output = Output::default();
    let mut parse_error = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|e| format!("could not read the output of `{shown}`: {e}"))?;
        match output.push_line(&line) {
            Ok(Some(r)) => println!("    {}", progress_line(r)),
            Ok(None) => {}
            Err(e) => {
                parse_error.get_or_insert(e);
            }
        }
    }
    let status = child
        .wait()
        .map_err(|e| format!("could not wait for `{shown}`: {e}"))?;
    if !status.success() {
        return Err(format!("`{shown}` failed ({status})").into());
    }
    if let Some(e) = parse_error {
        return Err(format!("`{shown}` printed an unexpected line: {e}").into());
    }
    Ok(output)
}

/// One line describing a record as it arrives: who, what, the median and the throughput.
pub fn progress_line(r: &Record) -> String {
    let what = match (&r.model, &r.phase) {
        (Some(m), Some(p)) => format!("{m} {p} n={}", r.n),
        (None, Some(p)) => format!("{p} n={}", r.n),
        _ => format!("n={}", r.n),
    };
    let rate = match r.samples_per_s {
        Some(s) => format!("{s:.0} samples/s"),
        None => format!("{:.1} GFLOP/s", r.gflops),
    };
    format!(
        "{} {} {what}: median {:.3} ms over {} reps (spread {:.0}%), {rate}",
        r.framework,
        r.backend,
        r.median_s * 1e3,
        r.reps,
        100.0 * r.relative_spread()
    )
}
