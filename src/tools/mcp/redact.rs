//! Keeping what a server says, and the secrets of its URL, out of errors and logs.

use super::*;

/// Hides what in a server's URL may be a secret (user, password, query,
/// fragment) wherever an error of the HTTP stack repeats the URL.
#[derive(Clone, Default)]
pub(super) struct Redactor {
    /// What to replace and by what, longest first.
    replacements: Vec<(String, String)>,
}

/// Shorter parts are not searched for (they would cut up unrelated words).
pub(super) const MIN_SECRET_CHARS: usize = 4;

impl Redactor {
    pub(super) fn for_url(raw: &str, url: &reqwest::Url) -> Self {
        let mut shown = url.clone();
        let _ = shown.set_username("");
        let _ = shown.set_password(None);
        let hidden = url.query().is_some() || url.fragment().is_some();
        shown.set_query(None);
        shown.set_fragment(None);
        let mut shown = shown.to_string();
        if hidden {
            shown.push_str("?[redacted]");
        }
        let mut replacements: Vec<(String, String)> = Vec::new();
        if shown != raw {
            replacements.push((raw.to_owned(), shown.clone()));
            replacements.push((url.as_str().to_owned(), shown));
        }
        let raw_query = raw.split_once('?').map(|(_, q)| q.to_owned());
        let mut parts: Vec<String> = [
            raw_query,
            url.query().map(str::to_owned),
            url.fragment().map(str::to_owned),
            url.password().map(str::to_owned),
            Some(url.username().to_owned()),
        ]
        .into_iter()
        .flatten()
        .collect();
        parts.extend(url.query_pairs().map(|(_, v)| v.into_owned()));
        parts.extend(
            url.query()
                .into_iter()
                .flat_map(|q| q.split('&'))
                .filter_map(|pair| pair.split_once('=').map(|(_, v)| v.to_owned())),
        );
        replacements.extend(
            parts
                .into_iter()
                .filter(|p| p.chars().count() >= MIN_SECRET_CHARS)
                .map(|p| (p, "[redacted]".to_owned())),
        );
        replacements.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
        replacements.dedup_by(|a, b| a.0 == b.0);
        Self { replacements }
    }

    pub(super) fn apply(&self, text: &str) -> String {
        self.replacements
            .iter()
            .fold(text.to_owned(), |text, (from, to)| text.replace(from, to))
    }
}

/// At most [`MAX_MESSAGE_BYTES`] of `text`, cut on a character boundary.
pub(super) fn capped(text: &str) -> String {
    if text.len() <= MAX_MESSAGE_BYTES {
        return text.to_owned();
    }
    let mut end = MAX_MESSAGE_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} more bytes)", &text[..end], text.len() - end)
}
