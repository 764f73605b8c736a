//! The lifecycle plot: per phase, every Tessera backend's and every peer's throughput relative
//! to Tessera's CPU backend, as grouped bars in an SVG file (plotters, no font files needed).

use std::path::Path;

use plotters::prelude::*;

use crate::bench::lifecycle::{peer_title, Lifecycle, REFERENCE_BACKEND};
use crate::TaskResult;

/// Bar colours, one per series in order.
const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// One bar series: its legend name and, per row, the throughput relative to Tessera CPU.
struct Series {
    name: String,
    values: Vec<Option<f64>>,
}

/// The series of the plot: each Tessera backend, then each peer.
fn series(report: &Lifecycle) -> Vec<Series> {
    let relative = |cell: Option<f64>, cpu: Option<f64>| match (cell, cpu) {
        (Some(t), Some(c)) if t > 0.0 => Some(c / t),
        _ => None,
    };
    let mut out = Vec::new();
    for backend in &report.backends {
        out.push(Series {
            name: format!("Tessera {backend}"),
            values: report
                .rows
                .iter()
                .map(|row| {
                    let cpu = row.tessera.get(REFERENCE_BACKEND).map(|c| c.median_s);
                    relative(row.tessera.get(backend).map(|c| c.median_s), cpu)
                })
                .collect(),
        });
    }
    for peer in &report.peers {
        out.push(Series {
            name: format!("{} cpu", peer_title(peer)),
            values: report
                .rows
                .iter()
                .map(|row| {
                    let cpu = row.tessera.get(REFERENCE_BACKEND).map(|c| c.median_s);
                    relative(row.peers.get(peer).map(|c| c.median_s), cpu)
                })
                .collect(),
        });
    }
    out
}

/// Draws the report to an SVG file at `path`: one group of bars per phase row.
pub fn write_svg(report: &Lifecycle, machine: &str, path: &Path) -> TaskResult<()> {
    let all = series(report);
    let rows = report.rows.len().max(1);
    let top = all
        .iter()
        .flat_map(|s| s.values.iter().flatten())
        .fold(1.0f64, |a, &b| a.max(b))
        * 1.15;
    let labels: Vec<String> = report.rows.iter().map(|r| r.label()).collect();
    let root = SVGBackend::new(path, (1100, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("Tessera lifecycle: throughput relative to Tessera CPU ({machine})"),
            ("sans-serif", 18),
        )
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..rows as f64 - 0.5, 0f64..top)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(rows + 1)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < labels.len() {
                labels[i as usize].clone()
            } else {
                String::new()
            }
        })
        .y_desc("throughput / Tessera cpu (higher is better)")
        .draw()
        .map_err(plot_error)?;
    let width = 0.8 / all.len().max(1) as f64;
    for (j, s) in all.iter().enumerate() {
        let color = PALETTE[j % PALETTE.len()];
        let bars = s.values.iter().enumerate().filter_map(|(i, v)| {
            v.map(|v| {
                let left = i as f64 - 0.4 + j as f64 * width;
                Rectangle::new([(left, 0.0), (left + width * 0.92, v)], color.filled())
            })
        });
        chart
            .draw_series(bars)
            .map_err(plot_error)?
            .label(s.name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    chart
        .draw_series(std::iter::once(PathElement::new(
            vec![(-0.5, 1.0), (rows as f64 - 0.5, 1.0)],
            BLACK.mix(0.4),
        )))
        .map_err(plot_error)?;
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(plot_error)?;
    root.present().map_err(plot_error)?;
    Ok(())
}

fn plot_error<E: std::fmt::Display>(e: E) -> crate::TaskError {
    format!("could not draw the plot: {e}").into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::record::Record;
    use crate::bench::timing::Timing;

    #[test]
    fn the_svg_names_every_phase_and_series() {
        let t = Timing::from_samples(&[0.01]).unwrap();
        let records = [
            Record::new("mlp", "tessera", "cpu", 128, &t)
                .with_samples()
                .with_model("mlp")
                .with_phase("train"),
            Record::new(
                "mlp",
                "torch",
                "cpu",
                128,
                &Timing::from_samples(&[0.02]).unwrap(),
            )
            .with_samples()
            .with_model("mlp")
            .with_phase("train"),
            Record::new("prep", "tessera", "cpu", 60000, &t)
                .with_samples()
                .with_phase("prep"),
        ];
        let report = Lifecycle::from_records(&records);
        let dir = std::env::temp_dir().join(format!("tessera-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("lifecycle.svg");
        write_svg(&report, "test machine", &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        for text in ["train mlp", "prep", "Tessera cpu", "PyTorch cpu", "<rect"] {
            assert!(svg.contains(text), "{text} missing");
        }
    }
}
