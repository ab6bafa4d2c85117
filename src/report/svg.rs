//! Charts as SVG text: line/scatter charts on linear or log2 axes with 95 % CI error bars,
//! marked points and a legend; tile maps; "not available here" panels.
//!
//! Hand-written rather than `plotters`: plotters measures text through font-kit and system font
//! files to lay out labels, which a report meant to render the same offline everywhere should not
//! depend on; and the report needs per-point tooltips (`<title>`) and marks the page's check can
//! count (`class="mark"`), which are a few lines here. Text uses the viewer's system font stack.
use std::fmt::Write;

const W: f64 = 660.0;
const H: f64 = 360.0;
const LEFT: f64 = 72.0;
const RIGHT: f64 = 190.0; // room for the legend
const TOP: f64 = 46.0; // room for a two-line title
const BOTTOM: f64 = 52.0;
/// Sixteen qualitative colours that stay apart on white (Tableau's ten, then navy, olive, maroon,
/// teal, magenta and black); series past sixteen reuse them with a dash pattern and another
/// marker, so no two series of a figure look the same ([`style`]).
pub(super) const PALETTE: [&str; 16] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22", "#000075", "#808000",
    "#800000", "#469990", "#f032e6", "#000000",
];
/// Line dashes and marker shapes, one per round of the palette.
const DASHES: [&str; 4] = ["", "6 3", "2 2", "9 3 2 3"];
const MARKERS: [Marker; 4] = [Marker::Circle, Marker::Square, Marker::Triangle, Marker::Diamond];

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Marker {
    Circle,
    Square,
    Triangle,
    Diamond,
}

/// How series `i` of a figure is drawn: (colour, dash pattern, marker); distinct for the first
/// 64 series of a figure.
pub(crate) fn style(i: usize) -> (&'static str, &'static str, Marker) {
    let round = (i / PALETTE.len()) % DASHES.len();
    (PALETTE[i % PALETTE.len()], DASHES[round], MARKERS[round])
}

/// A marker centred on (x, y) with radius r.
fn marker(m: Marker, x: f64, y: f64, r: f64, fill: &str, stroke: &str, title: &str) -> String {
    let shape = match m {
        Marker::Circle => format!(r#"<circle class="mark" cx="{x:.1}" cy="{y:.1}" r="{r}""#),
        Marker::Square => format!(r#"<rect class="mark" x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}""#, x - r, y - r, 2.0 * r, 2.0 * r),
        Marker::Triangle => {
            format!(
                r#"<path class="mark" d="M{x:.1},{:.1}L{:.1},{:.1}L{:.1},{:.1}Z""#,
                y - r * 1.2,
                x + r * 1.1,
                y + r * 0.8,
                x - r * 1.1,
                y + r * 0.8
            )
        }
        Marker::Diamond => format!(
            r#"<path class="mark" d="M{x:.1},{:.1}L{:.1},{y:.1}L{x:.1},{:.1}L{:.1},{y:.1}Z""#,
            y - r * 1.3,
            x + r * 1.1,
            y + r * 1.3,
            x - r * 1.1
        ),
    };
    let inner = if title.is_empty() { String::new() } else { format!("<title>{}</title>", esc(title)) };
    let close = match m {
        Marker::Circle => "</circle>",
        Marker::Square => "</rect>",
        _ => "</path>",
    };
    format!(r#"{shape} fill="{fill}" stroke="{stroke}" stroke-width="1.5">{inner}{close}"#)
}

/// A byte count as a block size is said: 512 B, 4 KiB, 1 MiB (1.5 KiB where not whole).
pub(crate) fn binary_size(v: f64) -> String {
    crate::plan::size::format_bytes(v).replace(".0 ", " ")
}

/// Text from the database as XML/HTML text or an attribute value in double quotes: markup characters
/// escaped, and characters XML 1.0 forbids (C0 controls but tab, newline and carriage return;
/// U+FFFE, U+FFFF) or discourages (DEL, C1 controls) replaced by U+FFFD, so that no host name,
/// device model or plan name can end an element, an attribute or make a file ill-formed.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(xml_char(c)),
        }
    }
    out
}

/// `c`, or U+FFFD where XML 1.0 forbids or discourages it (see `esc`).
fn xml_char(c: char) -> char {
    match c {
        '\t' | '\n' | '\r' => c,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{fffe}' | '\u{ffff}' => '\u{fffd}',
        c => c,
    }
}

/// Text for the body of an XML comment (`<!-- text -->`): characters XML forbids replaced as
/// in `esc`, and no two hyphens in a row (XML forbids "--" inside a comment, and "-->" would end
/// it): a space goes between them.
pub fn comment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars().map(xml_char) {
        if c == '-' && out.ends_with('-') {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// Numbers for axis ticks and labels: three significant digits with k/M/G.
pub(crate) fn short_number(x: f64) -> String {
    let a = x.abs();
    let (v, suffix) = if a >= 1e9 {
        (x / 1e9, "G")
    } else if a >= 1e6 {
        (x / 1e6, "M")
    } else if a >= 1e3 {
        (x / 1e3, "k")
    } else {
        (x, "")
    };
    let digits = if v.abs() >= 100.0 || v == v.trunc() {
        0
    } else if v.abs() >= 10.0 {
        1
    } else {
        2
    };
    let mut s = format!("{v:.digits$}");
    if s.contains('.') {
        s = s.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    s + suffix
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    Linear,
    Log2,
    /// A size in bytes: a log-2 axis with binary ticks (4 KiB, 8 KiB … 1 MiB).
    Bytes,
}

impl Scale {
    pub(crate) fn is_log(self) -> bool {
        self != Scale::Linear
    }

    /// A tick's text on an axis of this scale.
    fn tick(self, v: f64) -> String {
        match self {
            Scale::Bytes => binary_size(v),
            _ => short_number(v),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Axis {
    pub label: String,
    pub scale: Scale,
}

#[derive(Clone, Debug)]
pub struct Point {
    pub x: f64,
    pub y: f64,
    /// Half-width of the 95 % confidence interval of y (drawn as an error bar).
    pub ci: Option<f64>,
    /// Tooltip text.
    pub tip: String,
    /// Drawn hollow: a replicate was flagged as an outlier or polling fell back.
    pub flagged: bool,
}

#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub points: Vec<Point>,
}

/// A point called out on the chart (e.g. a saturation point).
#[derive(Clone, Debug)]
pub struct Callout {
    pub x: f64,
    pub y: f64,
    pub text: String,
}

#[derive(Clone, Debug)]
pub struct Chart {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
    pub callouts: Vec<Callout>,
    /// Join each series' points with a line (false: scatter only).
    pub lines: bool,
}

struct Mapping {
    lo: f64,
    hi: f64,
    scale: Scale,
    from: f64,
    to: f64,
}

impl Mapping {
    fn t(&self, v: f64) -> f64 {
        let (a, b, v) = match self.scale {
            Scale::Linear => (self.lo, self.hi, v),
            Scale::Log2 | Scale::Bytes => (self.lo.log2(), self.hi.log2(), v.max(f64::MIN_POSITIVE).log2()),
        };
        let f = if b > a { (v - a) / (b - a) } else { 0.5 };
        self.from + f * (self.to - self.from)
    }

    fn ticks(&self) -> Vec<f64> {
        match self.scale {
            Scale::Log2 | Scale::Bytes => {
                let (a, b) = (self.lo.log2().floor() as i32, self.hi.log2().ceil() as i32);
                // As many ticks as fit their text (binary sizes are wider than counts).
                let room = ((self.to - self.from).abs() / if self.scale == Scale::Bytes { 50.0 } else { 30.0 }).max(2.0) as i32;
                let step = ((b - a + room - 1) / room).max(1);
                (a..=b).step_by(step as usize).map(|e| 2f64.powi(e)).filter(|v| *v >= self.lo * 0.999 && *v <= self.hi * 1.001).collect()
            }
            Scale::Linear => {
                let span = (self.hi - self.lo).max(f64::MIN_POSITIVE);
                let raw = span / 5.0;
                let mag = 10f64.powf(raw.log10().floor());
                let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|s| span / s <= 6.0).unwrap_or(10.0 * mag);
                let mut v = (self.lo / step).ceil() * step;
                let mut out = Vec::new();
                while v <= self.hi + step * 1e-9 {
                    out.push(if v.abs() < step * 1e-9 { 0.0 } else { v });
                    v += step;
                }
                out
            }
        }
    }
}

fn range(values: impl Iterator<Item = f64>, scale: Scale) -> (f64, f64) {
    let v: Vec<f64> = values.filter(|x| x.is_finite() && (!scale.is_log() || *x > 0.0)).collect();
    let (mut lo, mut hi) = v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)));
    if !lo.is_finite() {
        return (1.0, 2.0);
    }
    match scale {
        // Linear axes start at zero so bar-like comparisons are honest; a little headroom on top.
        Scale::Linear => {
            lo = lo.min(0.0);
            hi = if hi > lo { hi + (hi - lo) * 0.06 } else { lo + 1.0 };
        }
        Scale::Log2 | Scale::Bytes => {
            if hi <= lo {
                lo /= 2.0;
                hi *= 2.0;
            }
        }
    }
    (lo, hi)
}

fn header(out: &mut String, title: &str, kind: &str, height: f64) {
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-kind="{kind}" viewBox="0 0 {W} {height}" width="{W}" height="{height}" font-family="system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif" font-size="12">"#
    );
    let _ = write!(out, r##"<rect width="{W}" height="{height}" fill="#fff"/>"##);
    for (i, line) in wrap(title, 84).iter().take(2).enumerate() {
        let _ = write!(out, r#"<text x="12" y="{}" font-size="13" font-weight="600">{}</text>"#, 17 + 16 * i, esc(line));
    }
}

/// Where a figure's legend goes: beside the plot while every entry fits there whole, else under
/// it in as many columns as the longest name allows, the figure growing to hold them all.
struct Legend {
    beside: bool,
    columns: usize,
    column_width: f64,
    rows: usize,
    /// Characters of a name shown (the longest name's, up to what a full-width column holds).
    room: usize,
}

/// Legend rows' pitch and a name's glyph width (px) at the legend's 11 px.
const LEGEND_ROW: f64 = 16.0;
const LEGEND_GLYPH: f64 = 6.3;
/// Characters a legend name keeps under the plot (the whole name is its tooltip).
const LEGEND_MAX: usize = 96;

impl Legend {
    fn of(names: &[&str], plot_height: f64) -> Legend {
        let longest = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
        let beside_rows = (plot_height / LEGEND_ROW) as usize;
        if names.len() <= beside_rows && longest as f64 * LEGEND_GLYPH + 28.0 <= RIGHT {
            return Legend { beside: true, columns: 1, column_width: RIGHT, rows: names.len(), room: longest };
        }
        let room = longest.min(LEGEND_MAX).min(((W - 54.0) / LEGEND_GLYPH) as usize);
        let column_width = room as f64 * LEGEND_GLYPH + 30.0;
        let columns = (((W - 24.0) / column_width) as usize).clamp(1, names.len().max(1));
        Legend { beside: false, columns, column_width, rows: names.len().div_ceil(columns), room }
    }

    /// Room the legend takes under the plot.
    fn below(&self) -> f64 {
        if self.beside {
            0.0
        } else {
            8.0 + self.rows as f64 * LEGEND_ROW
        }
    }

    /// The top-left corner of entry `i`; `right` is the plot's right edge, `bottom` the figure's
    /// height without the legend.
    fn at(&self, i: usize, right: f64, bottom: f64) -> (f64, f64) {
        if self.beside {
            (right + 12.0, TOP + i as f64 * LEGEND_ROW)
        } else {
            (12.0 + (i % self.columns) as f64 * self.column_width, bottom + 6.0 + (i / self.columns) as f64 * LEGEND_ROW)
        }
    }

    fn name(&self, name: &str) -> String {
        truncate(name, self.room.max(8))
    }
}

/// Words into lines of at most `width` characters (a longer word gets a line of its own).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line += word;
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// A line or scatter chart. Points outside a log axis' domain (≤ 0) are left out, and the chart
/// says how many.
pub fn chart(c: &Chart) -> String {
    let xs = c.series.iter().flat_map(|s| s.points.iter().map(|p| p.x));
    let ys =
        c.series.iter().flat_map(|s| s.points.iter().flat_map(|p| [p.y + p.ci.unwrap_or(0.0), p.y - p.ci.unwrap_or(0.0).min(p.y * 0.999)]));
    let (xlo, xhi) = range(xs, c.x.scale);
    let (ylo, yhi) = range(ys, c.y.scale);
    let names: Vec<&str> = c.series.iter().map(|s| s.name.as_str()).collect();
    let legend = Legend::of(&names, H - BOTTOM - TOP);
    let right = if legend.beside { RIGHT } else { 24.0 };
    let height = H + legend.below();
    let (px0, px1, py0, py1) = (LEFT, W - right, H - BOTTOM, TOP);
    let mx = Mapping { lo: xlo, hi: xhi, scale: c.x.scale, from: px0 + 8.0, to: px1 - 8.0 };
    let my = Mapping { lo: ylo, hi: yhi, scale: c.y.scale, from: py0, to: py1 };
    let mut out = String::new();
    header(&mut out, &c.title, "chart", height);
    let _ = write!(out, r##"<rect x="{px0}" y="{py1}" width="{}" height="{}" fill="none" stroke="#999"/>"##, px1 - px0, py0 - py1);
    for t in mx.ticks() {
        let x = mx.t(t);
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="{py0}" x2="{x:.1}" y2="{}" stroke="#666"/><text class="tick x" x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            py0 + 4.0,
            py0 + 17.0,
            c.x.scale.tick(t)
        );
    }
    for t in my.ticks() {
        let y = my.t(t);
        let _ = write!(
            out,
            r##"<line x1="{px0}" y1="{y:.1}" x2="{px1}" y2="{y:.1}" stroke="#eee"/><text class="tick y" x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            px0 - 5.0,
            y + 4.0,
            c.y.scale.tick(t)
        );
    }
    let _ = write!(out, r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#, (px0 + px1) / 2.0, H - 12.0, esc(&c.x.label));
    let _ = write!(
        out,
        r#"<text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        (py0 + py1) / 2.0,
        esc(&c.y.label)
    );
    let mut dropped = 0;
    for (i, s) in c.series.iter().enumerate() {
        let (colour, dash, shape) = style(i);
        let shown: Vec<&Point> = s
            .points
            .iter()
            .filter(|p| {
                let ok = p.x.is_finite() && p.y.is_finite() && (!c.x.scale.is_log() || p.x > 0.0) && (!c.y.scale.is_log() || p.y > 0.0);
                dropped += usize::from(!ok);
                ok
            })
            .collect();
        let dasharray = if dash.is_empty() { String::new() } else { format!(r#" stroke-dasharray="{dash}""#) };
        if c.lines && shown.len() > 1 {
            let d: Vec<String> = shown.iter().map(|p| format!("{:.1},{:.1}", mx.t(p.x), my.t(p.y))).collect();
            let _ = write!(out, r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="1.6"{dasharray}/>"#, d.join(" "));
        }
        for p in shown {
            let (x, y) = (mx.t(p.x), my.t(p.y));
            if let Some(ci) = p.ci.filter(|c| *c > 0.0) {
                let (a, b) = (my.t(p.y - ci.min(if c.y.scale.is_log() { p.y * 0.999 } else { ci })), my.t(p.y + ci));
                let _ = write!(
                    out,
                    r#"<path d="M{x:.1},{a:.1}V{b:.1}M{:.1},{a:.1}h6M{:.1},{b:.1}h6" stroke="{colour}" fill="none"/>"#,
                    x - 3.0,
                    x - 3.0
                );
            }
            let fill = if p.flagged { "#fff" } else { colour };
            out += &marker(shape, x, y, 3.6, fill, colour, &p.tip);
        }
        let (lx, ly) = legend.at(i, px1, H);
        let _ = write!(
            out,
            r#"<g class="legend"><title>{}</title><line class="swatch" data-colour="{colour}" data-dash="{dash}" x1="{lx:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{colour}" stroke-width="2"{dasharray}/>{}<text x="{:.1}" y="{:.1}" font-size="11">{}</text></g>"#,
            esc(&s.name),
            ly + 6.0,
            lx + 20.0,
            ly + 6.0,
            marker(shape, lx + 10.0, ly + 6.0, 3.2, colour, colour, "").replace("class=\"mark\" ", ""),
            lx + 25.0,
            ly + 10.0,
            esc(&legend.name(&s.name))
        );
    }
    for m in &c.callouts {
        if (c.x.scale.is_log() && m.x <= 0.0) || (c.y.scale.is_log() && m.y <= 0.0) {
            continue;
        }
        let (x, y) = (mx.t(m.x), my.t(m.y));
        // Keep the label inside the plot: left of points in the right half, below points near the top.
        let (tx, anchor) = if x > (px0 + px1) / 2.0 { (x - 10.0, "end") } else { (x + 10.0, "start") };
        let ty = if y < py1 + 24.0 { y + 22.0 } else { y - 10.0 };
        let _ = write!(
            out,
            r##"<circle cx="{x:.1}" cy="{y:.1}" r="8" fill="none" stroke="#000" stroke-width="2"/><text x="{tx:.1}" y="{ty:.1}" text-anchor="{anchor}" font-weight="600">{}</text>"##,
            esc(&m.text)
        );
    }
    if dropped > 0 {
        let _ = write!(
            out,
            r##"<text x="{px0}" y="{}" fill="#a00">{dropped} point(s) not drawable on a log axis (value ≤ 0)</text>"##,
            H - 28.0
        );
    }
    out + "</svg>"
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}

/// One tile of a map.
#[derive(Clone, Debug)]
pub struct Tile {
    pub col: usize,
    pub row: usize,
    /// Big text (e.g. the winning method) and small lines under it (e.g. "+12 % over irq").
    pub text: String,
    pub sub: Vec<String>,
    /// Tiles with the same key share a colour (e.g. the winning method); empty or [`TIE_KEY`] = grey.
    pub key: String,
    pub tip: String,
}

#[derive(Clone, Debug)]
pub struct TileMap {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub cols: Vec<String>,
    pub rows: Vec<String>,
    pub tiles: Vec<Tile>,
}

/// The key "tie" is grey: a tied tile has no winner to colour.
pub const TIE_KEY: &str = "tie";

fn key_colour(keys: &[&str], key: &str) -> &'static str {
    match keys.iter().filter(|k| **k != TIE_KEY).position(|k| *k == key) {
        Some(i) => PALETTE[i % PALETTE.len()],
        None => "#b0b0b0",
    }
}

pub(crate) fn tile_map(m: &TileMap) -> String {
    let mut keys: Vec<&str> = m.tiles.iter().map(|t| t.key.as_str()).filter(|k| !k.is_empty()).collect();
    keys.sort();
    keys.dedup();
    let legend = Legend::of(&keys, H - BOTTOM - TOP);
    let right = if legend.beside { RIGHT } else { 24.0 };
    let (px0, px1, py0, py1) = (LEFT, W - right, TOP + 6.0, H - BOTTOM);
    let cw = (px1 - px0) / m.cols.len().max(1) as f64;
    let rh = (py1 - py0) / m.rows.len().max(1) as f64;
    let mut out = String::new();
    header(&mut out, &m.title, "map", H + legend.below());
    for (i, c) in m.cols.iter().enumerate() {
        let _ = write!(
            out,
            r#"<text class="tick x" x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            px0 + (i as f64 + 0.5) * cw,
            py1 + 16.0,
            esc(c)
        );
    }
    for (i, r) in m.rows.iter().enumerate() {
        let _ = write!(out, r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#, px0 - 6.0, py0 + (i as f64 + 0.5) * rh + 4.0, esc(r));
    }
    let _ = write!(out, r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#, (px0 + px1) / 2.0, H - 12.0, esc(&m.x_label));
    let _ = write!(
        out,
        r#"<text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        (py0 + py1) / 2.0,
        esc(&m.y_label)
    );
    // Characters that fit across a tile at a glyph width (px); the tooltip has the whole text.
    let fit = |glyph: f64| ((cw - 6.0) / glyph).max(4.0) as usize;
    for t in &m.tiles {
        let colour = key_colour(&keys, &t.key);
        let (x, y) = (px0 + t.col as f64 * cw, py0 + t.row as f64 * rh);
        let top = y + rh / 2.0 - 6.0 * t.sub.len() as f64;
        let _ = write!(
            out,
            r##"<g class="mark"><title>{}</title><rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{colour}" fill-opacity="0.55" stroke="#fff" stroke-width="2"/><text x="{:.1}" y="{top:.1}" text-anchor="middle" font-weight="600">{}</text>"##,
            esc(&t.tip),
            cw,
            rh,
            x + cw / 2.0,
            esc(&truncate(&t.text, fit(7.5)))
        );
        for (i, line) in t.sub.iter().enumerate() {
            let _ = write!(
                out,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="11">{}</text>"#,
                x + cw / 2.0,
                top + 14.0 + 13.0 * i as f64,
                esc(&truncate(line, fit(6.2)))
            );
        }
        out += "</g>";
    }
    for (i, k) in keys.iter().enumerate() {
        let (lx, ly) = legend.at(i, px1, H);
        let _ = write!(
            out,
            r#"<g class="legend"><title>{}</title><rect class="swatch" data-colour="{}" x="{lx:.1}" y="{:.1}" width="12" height="12" fill="{}" fill-opacity="0.55"/><text x="{:.1}" y="{:.1}" font-size="11">{}</text></g>"#,
            esc(k),
            key_colour(&keys, k),
            ly + 1.0,
            key_colour(&keys, k),
            lx + 16.0,
            ly + 11.0,
            esc(&legend.name(k))
        );
    }
    out + "</svg>"
}

/// Stacked bars: one bar per label, its parts stacked in the order given (one colour per part
/// name, the same in every bar), a tooltip per part with its value.
pub struct StackedBars {
    pub title: String,
    pub y_label: String,
    pub bars: Vec<(String, Vec<(String, f64)>)>,
}

pub(crate) fn stacked_bars(c: &StackedBars) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for (_, ps) in &c.bars {
        for (name, _) in ps {
            if !parts.contains(&name.as_str()) {
                parts.push(name);
            }
        }
    }
    // One part in every bar (a quantity per configuration): the y axis names it, no legend.
    let keyed = parts.len() > 1;
    let legend = Legend::of(if keyed { &parts } else { &[] }, H - BOTTOM - TOP);
    let right = if legend.beside && keyed { RIGHT } else { 24.0 };
    let slot = (W - right - LEFT) / c.bars.len().max(1) as f64;
    // Labels that do not fit under their bar are written upright (rotated a quarter turn, so
    // that none runs off the figure's side), whole; the figure grows to hold them.
    const GLYPH: f64 = 5.3;
    let longest = c.bars.iter().map(|(l, _)| l.chars().count()).max().unwrap_or(0) as f64;
    let slanted = longest * GLYPH > slot - 4.0;
    let labels = if slanted { longest * GLYPH + 6.0 - (BOTTOM - 14.0) } else { 0.0 }.max(0.0);
    let base_h = H + labels;
    let height = base_h + legend.below();
    let mut out = String::new();
    header(&mut out, &c.title, "stacked-bars", height);
    let top = c.bars.iter().map(|(_, ps)| ps.iter().map(|p| p.1.max(0.0)).sum::<f64>()).fold(0.0, f64::max);
    let y = Mapping { lo: 0.0, hi: if top > 0.0 { top } else { 1.0 }, scale: Scale::Linear, from: H - BOTTOM, to: TOP + 8.0 };
    for t in y.ticks() {
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" x2="{}" y1="{y0:.1}" y2="{y0:.1}" stroke="#eee"/><text class="tick y" x="{}" y="{:.1}" text-anchor="end" font-size="10">{}</text>"##,
            W - right,
            LEFT - 4.0,
            y.t(t) + 3.0,
            short_number(t),
            y0 = y.t(t)
        );
    }
    let _ = write!(
        out,
        r#"<text transform="translate(14 {:.1}) rotate(-90)" text-anchor="middle" font-size="11">{}</text>"#,
        (TOP + H - BOTTOM) / 2.0,
        esc(&c.y_label)
    );
    for (i, (label, ps)) in c.bars.iter().enumerate() {
        let x = LEFT + slot * i as f64 + slot * 0.15;
        let mut base = 0.0;
        for (name, v) in ps {
            let v = v.max(0.0);
            let colour = bar_fill(parts.iter().position(|p| p == name).unwrap_or(0));
            let (y1, y2) = (y.t(base + v), y.t(base));
            let _ = write!(
                out,
                r##"<rect class="mark" x="{x:.1}" y="{y1:.1}" width="{:.1}" height="{:.1}" fill="{colour}" stroke="#fff" stroke-width="0.5"><title>{}: {} ({})</title></rect>"##,
                slot * 0.7,
                (y2 - y1).max(0.0),
                esc(label),
                esc(name),
                short_number(v)
            );
            base += v;
        }
        let cx = x + slot * 0.35;
        let ly = H - BOTTOM + 14.0;
        if slanted {
            let _ = write!(
                out,
                r#"<text class="bar-label" transform="translate({:.1} {:.1}) rotate(-90)" text-anchor="end" font-size="10">{}</text>"#,
                cx + 3.5,
                ly - 8.0,
                esc(label)
            );
        } else {
            let _ =
                write!(out, r#"<text class="bar-label" x="{cx:.1}" y="{ly:.1}" text-anchor="middle" font-size="10">{}</text>"#, esc(label));
        }
    }
    for (i, name) in parts.iter().enumerate().filter(|_| keyed) {
        let (lx, ly) = legend.at(i, W - right, base_h);
        let _ = write!(
            out,
            r#"<g class="legend"><title>{}</title><rect class="swatch" data-colour="{}" x="{lx:.1}" y="{:.1}" width="11" height="11" fill="{}"/><text x="{:.1}" y="{:.1}" font-size="11">{}</text></g>"#,
            esc(name),
            bar_fill(i),
            ly + 1.0,
            bar_fill(i),
            lx + 16.0,
            ly + 10.0,
            esc(&legend.name(name))
        );
    }
    out + "</svg>"
}

/// A bar part's fill: the palette's colours, then (past sixteen parts) the same colours at
/// half strength, which a stacked bar can still tell apart from its neighbours.
fn bar_fill(i: usize) -> String {
    let colour = PALETTE[i % PALETTE.len()];
    if i < PALETTE.len() {
        return colour.to_string();
    }
    // Mix with white: #rrggbb → halfway to #ffffff.
    let mix = |k: usize| (u8::from_str_radix(&colour[k..k + 2], 16).unwrap_or(0) as u16 + 255) / 2;
    format!("#{:02x}{:02x}{:02x}", mix(1), mix(3), mix(5))
}

/// A panel standing where a figure would be when the machine could not produce its data, and
/// whether the whole reason fitted in it (the caller puts it in the caption otherwise).
pub fn unavailable(title: &str, reason: &str) -> (String, bool) {
    const MAX_LINES: usize = 16;
    let mut out = String::new();
    header(&mut out, title, "unavailable", H);
    let _ = write!(
        out,
        r##"<rect x="12" y="{TOP}" width="{}" height="{}" fill="#fafafa" stroke="#bbb" stroke-dasharray="5 4"><title>{}</title></rect>"##,
        W - 24.0,
        H - TOP - 12.0,
        esc(reason)
    );
    let _ = write!(out, r##"<text class="unavailable" x="26" y="{}" font-weight="600" fill="#a00">Not available here</text>"##, TOP + 24.0);
    // Long sysfs explanations are wrapped by words to stay inside the panel.
    let lines = wrap(reason, 104);
    for (i, line) in lines.iter().take(MAX_LINES).enumerate() {
        let _ = write!(out, r#"<text x="26" y="{}" font-size="11">{}</text>"#, TOP + 44.0 + 15.0 * i as f64, esc(line));
    }
    (out + "</svg>", lines.len() <= MAX_LINES)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(x: f64, y: f64) -> Point {
        Point { x, y, ci: Some(1.0), tip: format!("{x},{y}"), flagged: false }
    }

    #[test]
    fn text_from_the_database_cannot_end_markup_or_make_xml_ill_formed() {
        let hostile = "a--->\u{1}<script>x</script>'\"&\u{7}\u{ffff}-";
        let c = comment(hostile);
        assert!(!c.contains("--") && !c.chars().any(|c| c.is_control() && c != '\t'), "{c:?}");
        let e = esc(hostile);
        assert!(!e.contains(['<', '>', '"', '\u{1}', '\u{7}', '\u{ffff}']), "{e:?}");
        assert_eq!(esc("R&D <x>"), "R&amp;D &lt;x&gt;");
    }

    #[test]
    fn ticks_on_both_scales() {
        let log = Mapping { lo: 1.0, hi: 64.0, scale: Scale::Log2, from: 0.0, to: 300.0 };
        assert_eq!(log.ticks(), vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]);
        assert_eq!((log.t(1.0), log.t(8.0), log.t(64.0)), (0.0, 150.0, 300.0));
        // Block sizes: binary ticks, never 4.1k.
        let bytes = Mapping { lo: 4096.0, hi: 1048576.0, scale: Scale::Bytes, from: 0.0, to: 500.0 };
        let said: Vec<String> = bytes.ticks().iter().map(|t| Scale::Bytes.tick(*t)).collect();
        assert_eq!(said, ["4 KiB", "8 KiB", "16 KiB", "32 KiB", "64 KiB", "128 KiB", "256 KiB", "512 KiB", "1 MiB"]);
        let lin = Mapping { lo: 0.0, hi: 1060.0, scale: Scale::Linear, from: 0.0, to: 1.0 };
        assert_eq!(lin.ticks(), vec![0.0, 200.0, 400.0, 600.0, 800.0, 1000.0]);
        assert_eq!(short_number(125_000.0), "125k");
        assert_eq!(short_number(2.5e6), "2.5M");
        assert_eq!(short_number(0.25), "0.25");
    }

    #[test]
    fn one_mark_per_drawable_point_and_the_rest_said() {
        let c = Chart {
            title: "t".into(),
            x: Axis { label: "qd".into(), scale: Scale::Log2 },
            y: Axis { label: "IOPS".into(), scale: Scale::Linear },
            series: vec![Series { name: "a".into(), points: vec![pt(1.0, 10.0), pt(2.0, 20.0), pt(0.0, 5.0)] }],
            callouts: vec![],
            lines: true,
        };
        let svg = chart(&c);
        assert_eq!(svg.matches("class=\"mark\"").count(), 2);
        assert!(svg.contains("1 point(s) not drawable on a log axis"));
        assert!(svg.contains("<title>1,10</title>"));
    }

    /// Forty series: no two drawn alike (colour and dash), every name whole in a legend under the
    /// plot, the figure taller to hold it.
    #[test]
    fn many_series_stay_apart_and_the_legend_grows() {
        let series: Vec<Series> = (0..40)
            .map(|i| Series {
                name: format!("io_uring sqpoll poll QD{i} · nvme0n1+nvme1n1 · node-b"),
                points: vec![pt(1.0, i as f64), pt(2.0, 1.0)],
            })
            .collect();
        let styles: Vec<_> = (0..40).map(style).collect();
        assert!(styles.iter().enumerate().all(|(i, s)| !styles[..i].iter().any(|o| (o.0, o.1) == (s.0, s.1))));
        let c = Chart {
            title: "t".into(),
            x: Axis { label: "block size".into(), scale: Scale::Bytes },
            y: Axis { label: "IOPS".into(), scale: Scale::Linear },
            series,
            callouts: vec![],
            lines: true,
        };
        let svg = chart(&c);
        assert_eq!(svg.matches("class=\"legend\"").count(), 40);
        assert!(svg.contains(">io_uring sqpoll poll QD39 · nvme0n1+nvme1n1 · node-b</text>") && !svg.contains('…'));
        assert!(!svg.contains(&format!("height=\"{H}\"")), "the figure grew for its legend");
        let bars = StackedBars {
            title: "t".into(),
            y_label: "µs".into(),
            bars: vec![("io_uring sqpoll poll QD128 · nvme0n1".into(), vec![("a".into(), 1.0)]), ("b".into(), vec![("a".into(), 2.0)])],
        };
        assert!(stacked_bars(&bars).contains(">io_uring sqpoll poll QD128 · nvme0n1</text>"), "a bar's label is whole");
        assert_ne!(bar_fill(0), bar_fill(16));
    }

    #[test]
    fn unavailable_panel_wraps_and_says_whether_it_fits() {
        let (svg, fits) = unavailable("Power", "no RAPL here");
        assert!(fits && svg.contains("data-kind=\"unavailable\"") && svg.contains("Not available here") && svg.contains("no RAPL here"));
        let long = "word ".repeat(1000);
        assert!(!unavailable("Power", &long).1);
        assert_eq!(wrap("aa bb cc", 5), vec!["aa bb", "cc"]);
    }
}
