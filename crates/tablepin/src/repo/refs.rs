//! Branches and tags: listed, created, moved put-if-absent, deleted and
//! restored, each move an entry of the ref's log.

use super::*;

/// A ref as listed.
#[derive(Debug, Clone, Serialize)]
pub struct RefInfo {
    /// Its name.
    pub name: String,
    /// The version it names.
    pub target: VersionId,
    /// When it was last moved (ms).
    pub time_ms: i64,
    /// Its message: a tag's own message (given when it was created); a
    /// branch's last entry's.
    pub message: String,
    /// What moved a tag since it was created (an erasure), if anything.
    pub note: Option<String>,
    /// Entries in its log.
    pub entries: u64,
}

/// A store's damage or loss while reading a version's files, named as the
/// version's damage (which table, which version).
pub(crate) fn named(e: Error, version: Option<VersionId>, table: &str) -> Error {
    match (e, version) {
        (
            Error::Store(
                source @ (StoreError::Corrupt { .. }
                | StoreError::CorruptRange { .. }
                | StoreError::OutboardDamaged { .. }
                | StoreError::NotFound { .. }),
            ),
            Some(version),
        ) => Error::Damaged {
            what: "a data file or deletion vector".into(),
            version,
            table: format!(", table '{table}'"),
            source: Box::new(source),
        },
        (e, _) => e,
    }
}

/// The message a deleted tag was created with: that of the first entry
/// after the deletion before its last one.
pub(crate) fn tag_message_before_deletion(log: &[RefEntry]) -> Option<String> {
    let deleted = log.iter().rposition(|e| e.target.is_none())?;
    let created = log[..deleted]
        .iter()
        .rposition(|e| e.target.is_none())
        .map_or(0, |d| d + 1);
    log.get(created).map(|e| e.message.clone())
}

/// The version a ref's log named last (before a deletion, if it ends in
/// one).
pub(crate) fn last_named(log: &[RefEntry]) -> Option<VersionId> {
    log.iter().rev().find_map(|e| e.target)
}

/// "branch" or "tag".
pub(crate) fn kind_name(kind: RefKind) -> &'static str {
    match kind {
        RefKind::Branch => "branch",
        RefKind::Tag => "tag",
    }
}

/// Checks a tag, branch or table name.
pub fn check_name(what: &'static str, name: &str) -> Result<()> {
    let bad = |reason: &str| Error::InvalidName {
        what,
        name: name.to_string(),
        reason: reason.to_string(),
    };
    if name.is_empty() || name.len() > 200 {
        return Err(bad("it must have 1 to 200 characters"));
    }
    if !name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
    {
        return Err(bad("it must start with a letter or digit"));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return Err(bad("use only letters, digits, '.', '_' and '-'"));
    }
    if name.contains("..") {
        return Err(bad("it cannot contain '..'"));
    }
    Ok(())
}

impl Repo {
    /// The tombstone of an expired version, if it has one.
    pub(crate) async fn tombstone(&self, id: &VersionId) -> Result<Option<Tombstone>> {
        let path = layout::tombstone(id);
        match self.store.get_doc(&path).await? {
            None => Ok(None),
            Some(b) => Ok(Some(serde_json::from_slice(&b).map_err(|e| {
                Error::DamagedDocument(format!(
                    "tombstone {path} of expired version {} is damaged: {e}",
                    id.short(12)
                ))
            })?)),
        }
    }

    /// The error for a ref that does not exist, with the closest name of
    /// a live ref of that kind when one is near (a typo).
    pub(crate) async fn unknown_ref(&self, kind: RefKind, name: &str) -> Error {
        let hint = match self.store.ref_names(kind).await {
            Ok(names) => closest(
                name,
                names.iter().map(String::as_str).filter(|n| *n != name),
            )
            .map(|n| format!("; did you mean '{n}'?"))
            .unwrap_or_default(),
            Err(e) => return e.into(),
        };
        Error::UnknownRef {
            kind: kind_name(kind),
            name: name.to_string(),
            hint,
        }
    }

    /// A tag's own message (that of the entry that created it, after its
    /// last deletion) and, when an erasure moved it since, that entry's.
    pub(crate) async fn tag_message(
        &self,
        name: &str,
        head: &RefEntry,
    ) -> Result<(String, Option<String>)> {
        if head.seq <= 1 {
            return Ok((head.message.clone(), None));
        }
        let log = self.store.ref_log(RefKind::Tag, name).await?;
        let created = log
            .iter()
            .rposition(|e| e.target.is_none())
            .map_or(0, |deleted| deleted + 1);
        let Some(first) = log.get(created) else {
            return Ok((head.message.clone(), None));
        };
        let note = (first.seq != head.seq).then(|| head.message.clone());
        Ok((first.message.clone(), note))
    }

    /// The deleted refs of a kind and what each named last, as their logs
    /// say (no note: nothing else is read).
    pub(crate) async fn deleted_refs_as_logged(&self, kind: RefKind) -> Result<Vec<RefInfo>> {
        let mut out = Vec::new();
        for name in self.store.ref_names(kind).await? {
            let log = self.store.ref_log(kind, &name).await?;
            let Some(head) = log.last() else { continue };
            if head.target.is_some() {
                continue;
            }
            if let Some(last) = last_named(&log) {
                out.push(RefInfo {
                    name,
                    target: last,
                    time_ms: head.time_ms,
                    message: head.message.clone(),
                    note: None,
                    entries: head.seq,
                });
            }
        }
        Ok(out)
    }

    pub(crate) async fn move_ref(
        &self,
        kind: RefKind,
        name: &str,
        seq: u64,
        target: Option<VersionId>,
        message: &str,
    ) -> Result<()> {
        let entry = RefEntry {
            format: FORMAT_VERSION,
            seq: seq + 1,
            target,
            time_ms: now_ms(),
            author: self.author.clone(),
            message: message.to_string(),
            tables: None,
            hold: None,
        };
        Ok(self.store.append_ref(kind, name, &entry).await?)
    }

    /// The head of a branch that a write starts from. While an erasure
    /// holds the branch ([`RefHold`]) it waits for the next entry, or for
    /// the hold to lapse, and never for longer than a hold can count: the
    /// erasure moves the branch from the held entry, and a write that
    /// started from it would only lose that race.
    pub(crate) async fn head_to_write(&self, branch: &str) -> Result<Option<RefEntry>> {
        let started = std::time::Instant::now();
        let longest = std::time::Duration::from_millis(RefHold::MAX_MS as u64);
        let mut attempt = 0;
        loop {
            let head = self.store.ref_head(RefKind::Branch, branch).await?;
            let held = head.as_ref().and_then(|h| h.held_at(now_ms())).is_some();
            if !held || started.elapsed() >= longest {
                return Ok(head);
            }
            attempt += 1;
            tokio::time::sleep(transaction::retry_pause(attempt)).await;
        }
    }
}

/// A repository's branches and tags ([`Repo::refs`]): listed, read,
/// created, deleted and restored, each move an entry of the ref's log.
#[derive(Debug, Clone, Copy)]
pub struct Refs<'a> {
    repo: &'a Repo,
}

impl Repo {
    /// The repository's branches and tags.
    pub fn refs(&self) -> Refs<'_> {
        Refs { repo: self }
    }
}

impl Refs<'_> {
    /// The version a ref names now.
    pub async fn target(&self, kind: RefKind, name: &str) -> Result<VersionId> {
        match self.repo.store.ref_head(kind, name).await? {
            Some(RefEntry {
                target: Some(t), ..
            }) => Ok(t),
            _ => Err(self.repo.unknown_ref(kind, name).await),
        }
    }

    /// Every live ref of a kind.
    pub async fn list(&self, kind: RefKind) -> Result<Vec<RefInfo>> {
        let mut out = Vec::new();
        for name in self.repo.store.ref_names(kind).await? {
            if let Some(h) = self.repo.store.ref_head(kind, &name).await? {
                if let Some(t) = h.target {
                    let (message, note) = match kind {
                        RefKind::Tag => self.repo.tag_message(&name, &h).await?,
                        RefKind::Branch => (h.message, None),
                    };
                    out.push(RefInfo {
                        name,
                        target: t,
                        time_ms: h.time_ms,
                        message,
                        note,
                        entries: h.seq,
                    });
                }
            }
        }
        Ok(out)
    }

    /// Creates a ref at a revision.
    pub async fn create(
        &self,
        kind: RefKind,
        name: &str,
        rev: &str,
        message: &str,
    ) -> Result<VersionId> {
        let what = match kind {
            RefKind::Branch => "branch",
            RefKind::Tag => "tag",
        };
        check_name(what, name)?;
        let other = match kind {
            RefKind::Branch => RefKind::Tag,
            RefKind::Tag => RefKind::Branch,
        };
        if let Some(RefEntry {
            target: Some(t), ..
        }) = self.repo.store.ref_head(other, name).await?
        {
            // A revision naming both would be ambiguous.
            return Err(Error::NameTaken {
                kind: what,
                name: name.to_string(),
                other: kind_name(other),
                target: t.short(12),
            });
        }
        let target = self.repo.resolve(rev).await?;
        let head = self.repo.store.ref_head(kind, name).await?;
        if let Some(RefEntry {
            target: Some(t), ..
        }) = &head
        {
            return Err(Error::RefExists {
                kind: what,
                name: name.to_string(),
                target: t.short(12),
            });
        }
        self.repo
            .move_ref(
                kind,
                name,
                head.as_ref().map_or(0, |h| h.seq),
                Some(target),
                message,
            )
            .await?;
        Ok(target)
    }

    /// Deletes a ref (appends a deleting entry to its log; the ref stays
    /// restorable with [`Refs::restore`], and gc keeps what it named
    /// for its grace period). Without `force`, the default branch and the
    /// repository's only branch are refused: with no branch left, gc would
    /// expire every version.
    pub async fn delete(&self, kind: RefKind, name: &str, force: bool) -> Result<VersionId> {
        let old = self.target(kind, name).await?;
        if kind == RefKind::Branch && !force {
            let live = self.list(RefKind::Branch).await?;
            let reason = if live.len() == 1 {
                Some(format!("'{name}' is the repository's only branch"))
            } else if name == DEFAULT_BRANCH {
                Some(format!("'{name}' is the branch commits go to by default"))
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(Error::ProtectedBranch {
                    name: name.to_string(),
                    reason,
                    what: "every version only it reaches".into(),
                });
            }
        }
        let head = self.repo.store.ref_head(kind, name).await?;
        self.repo
            .move_ref(kind, name, head.map_or(0, |h| h.seq), None, "deleted")
            .await?;
        Ok(old)
    }

    /// Every deleted ref of a kind: its name, the version it named last,
    /// and when it was deleted (`time_ms`, `message` of the deleting entry);
    /// `note` says when gc has expired that version since.
    pub async fn deleted(&self, kind: RefKind) -> Result<Vec<RefInfo>> {
        let mut out = self.repo.deleted_refs_as_logged(kind).await?;
        for r in &mut out {
            // Past gc's grace its version may be gone: say so, rather than
            // offer a restore that cannot be.
            if let Some(t) = self.repo.tombstone(&r.target).await? {
                if !self.repo.store.has_blob(&r.target.0).await? {
                    r.note = Some(format!(
                        "its version was expired by gc ({}); it cannot be restored",
                        t.reason
                    ));
                }
            }
        }
        Ok(out)
    }

    /// Restores a deleted ref to the version it named last.
    pub async fn restore(&self, kind: RefKind, name: &str) -> Result<VersionId> {
        let what = kind_name(kind);
        let Some(d) = self
            .repo
            .deleted_refs_as_logged(kind)
            .await?
            .into_iter()
            .find(|r| r.name == name)
        else {
            return Err(match self.repo.store.ref_head(kind, name).await? {
                Some(RefEntry {
                    target: Some(t), ..
                }) => Error::RefExists {
                    kind: what,
                    name: name.to_string(),
                    target: t.short(12),
                },
                _ => self.repo.unknown_ref(kind, name).await,
            });
        };
        // The version must still be readable (gc keeps it for the grace
        // period after the deletion; later it may have expired, which is
        // said as such); an erasure since stands in with its replacement.
        let target = self
            .repo
            .erased_since(d.target)
            .await?
            .map_or(d.target, |r| r.new);
        // A tag comes back with its own message: the one it was created
        // with before its deletion.
        let message = match kind {
            RefKind::Tag => {
                let log = self.repo.store.ref_log(kind, name).await?;
                tag_message_before_deletion(&log).unwrap_or_else(|| "restored".into())
            }
            RefKind::Branch => "restored".into(),
        };
        self.repo
            .move_ref(kind, name, d.entries, Some(target), &message)
            .await?;
        Ok(target)
    }
}
