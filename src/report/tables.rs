//! A table once, three ways: HTML for the page, CSV and Markdown for papers.
use super::svg::esc;
use crate::store::csv_quote;

#[derive(Clone, Debug, Default)]
pub struct Table {
    pub title: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// Sentences printed under the table (and as a trailing Markdown paragraph); not in the CSV,
    /// which stays machine-readable.
    pub notes: Vec<String>,
}

impl Table {
    pub fn new(title: impl Into<String>, columns: &[&str]) -> Table {
        Table { title: title.into(), columns: columns.iter().map(|c| c.to_string()).collect(), ..Default::default() }
    }

    pub fn html(&self) -> String {
        let mut s = String::from("<table><thead><tr>");
        for c in &self.columns {
            s += &format!("<th>{}</th>", esc(c));
        }
        s += "</tr></thead><tbody>";
        for r in &self.rows {
            s += "<tr>";
            for c in r {
                s += &format!("<td>{}</td>", esc(c));
            }
            s += "</tr>";
        }
        s += "</tbody></table>";
        for n in &self.notes {
            s += &format!("<p class=\"note\">{}</p>", esc(n));
        }
        s
    }

    pub fn csv(&self) -> String {
        let line = |cells: &[String]| cells.iter().map(|c| csv_quote(c).into_owned()).collect::<Vec<_>>().join(",") + "\n";
        let mut s = line(&self.columns);
        for r in &self.rows {
            s += &line(r);
        }
        s
    }

    pub fn markdown(&self) -> String {
        let cell = |c: &str| c.replace('|', "\\|").replace('\n', " ");
        let line = |cells: &[String]| format!("| {} |\n", cells.iter().map(|c| cell(c)).collect::<Vec<_>>().join(" | "));
        let mut s = format!("**{}**\n\n", cell(&self.title));
        s += &line(&self.columns);
        s += &format!("|{}\n", "---|".repeat(self.columns.len()));
        for r in &self.rows {
            s += &line(r);
        }
        for n in &self.notes {
            s += &format!("\n{n}\n");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_renderings() {
        let mut t = Table::new("T <1>", &["a", "b"]);
        t.rows.push(vec!["x,y".into(), "p|q".into()]);
        t.notes.push("n".into());
        assert_eq!(t.csv(), "a,b\n\"x,y\",p|q\n");
        assert_eq!(t.markdown(), "**T <1>**\n\n| a | b |\n|---|---|\n| x,y | p\\|q |\n\nn\n");
        assert!(t.html().contains("<th>a</th>") && t.html().contains("<p class=\"note\">n</p>"));
    }
}
