//! A table's case, built: editable, upstream, answered at a time, by
//! someone, of finance, on a relisted tool.

use super::*;

impl Case {
    pub(super) fn editable(mut self) -> Self {
        self.editable = true;
        self
    }

    pub(super) fn upstream(mut self) -> Self {
        self.upstream = true;
        self
    }

    pub(super) fn with_output(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    pub(super) fn at(mut self, now: u64) -> Self {
        self.now = now;
        self
    }

    pub(super) fn by(mut self, principal: &'static str, roles: &[&str]) -> Self {
        self.principal = principal;
        self.roles = roles.iter().map(|r| (*r).to_owned()).collect();
        self
    }

    pub(super) fn of_finance(self) -> Self {
        asked_of_finance(self)
    }

    /// The tool is offered as `definition` now (an MCP server relisted it).
    pub(super) fn relisted(mut self, definition: Option<&str>) -> Self {
        self.definition = definition.map(str::to_owned);
        self
    }

    /// Asked before toolgate kept fingerprints.
    pub(super) fn unfingerprinted(mut self) -> Self {
        self.issued.fingerprint = None;
        self
    }
}
