use super::*;

fn v(n: u8) -> VersionId {
    VersionId(ObjectId::of(&[n]))
}

#[test]
fn a_policy_keeps_heads_its_rules_and_tags_it_is_told_to() {
    // main: v5 (newest) .. v1, one version a day; tags on v1 and v2,
    // and v3's tag deleted within the grace period.
    let day = 86_400_000;
    let chain: Vec<(VersionId, i64)> = (1..=5).rev().map(|n| (v(n), i64::from(n) * day)).collect();
    let chains = BTreeMap::from([("main".to_string(), chain)]);
    let tags = vec![
        ("old".to_string(), v(1), true),
        ("mid".to_string(), v(2), true),
        ("gone".to_string(), v(3), false),
    ];
    let last2 = GcPolicy {
        keep_last: Some(2),
        keep_tags: false,
        ..Default::default()
    };
    let (kept, fates, deleted) = kept_versions(&chains, &tags, &last2, 5 * day);
    assert_eq!(kept, BTreeSet::from([v(5), v(4), v(3)]));
    assert_eq!(deleted, ["old", "mid"]);
    assert!(fates.iter().all(|f| !f.readable));
    let with_tags = GcPolicy {
        keep_tags: true,
        ..last2.clone()
    };
    let (kept, _, deleted) = kept_versions(&chains, &tags, &with_tags, 5 * day);
    assert_eq!(kept.len(), 5);
    assert!(deleted.is_empty());
    let within = GcPolicy {
        keep_within_ms: Some(day),
        keep_tags: false,
        ..Default::default()
    };
    let (kept, _, _) = kept_versions(&chains, &tags, &within, 5 * day);
    assert_eq!(kept, BTreeSet::from([v(5), v(4), v(3)]));
    // No rules: everything is kept.
    let (kept, _, _) = kept_versions(&chains, &tags, &GcPolicy::default(), 5 * day);
    assert_eq!(kept.len(), 5);
}
