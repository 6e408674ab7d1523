//! A reprise run as people read it outside reprise: Markdown ([`markdown`]), one
//! HTML file with its code highlighted ([`html`], [`highlight`]), and the page of
//! `reprise usage` ([`usage_html`]).
//!
//! Every format draws the same items, the chat's view model
//! ([`reprise_chat::view::export`], re-exported here): a [`Page`] says what goes
//! around them, an [`ItemWriter`] how each item reads. A host that shows runs its
//! own way writes its own `ItemWriter`; the binary streams a run through these
//! pages as it reads it.

pub mod highlight;
pub mod html;
pub mod markdown;
pub mod usage_html;

pub use reprise_chat::view::export::*;

/// A format of the exports, drawn a piece at a time into a text that is written
/// out as it grows: the heading, each conversation's items, the subagents' parts.
pub trait Page {
    /// What comes before the items.
    fn head(&self, out: &mut String, head: &RunHead);
    /// The writer of a conversation's items (a subagent's when `subagent`).
    fn items<'o>(&self, out: &'o mut String, subagent: bool) -> Box<dyn PageItems + 'o>;
    /// What opens a subagent's part.
    fn subagent_start(&self, out: &mut String, name: &str);
    /// What closes a subagent's part.
    fn subagent_end(&self, out: &mut String);
    /// What comes after everything.
    fn tail(&self, out: &mut String);
}

/// A writer of items that shows the text it writes into, to write it out.
pub trait PageItems: ItemWriter {
    /// The text written so far.
    fn out(&mut self) -> &mut String;
}

/// A run held whole, drawn by `page` in one text.
pub fn render_view(page: &dyn Page, view: &RunView) -> String {
    let mut out = String::with_capacity(64 * 1024);
    page.head(
        &mut out,
        &RunHead {
            title: view.title.clone(),
            facts: view.facts.clone(),
        },
    );
    write_items(&view.items, &mut *page.items(&mut out, false));
    for (name, subagent) in &view.subagents {
        page.subagent_start(&mut out, name);
        write_items(subagent, &mut *page.items(&mut out, true));
        page.subagent_end(&mut out);
    }
    page.tail(&mut out);
    out
}
