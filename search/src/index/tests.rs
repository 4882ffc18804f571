//! The index's ranking, on small catalogs.

use serde_json::json;

use super::SearchIndex;
use super::query::edit_distance;
use crate::MAX_LIMIT;
use crate::testing::{Catalog, ToolDef, catalog, names, sample, stripe_tools, tool};
use crate::text::clean_text;

/// A misspelt word the index has never seen reads as the index's words a slip
/// away from it; a known word is taken as written.
#[test]
fn typos_find_the_word_meant() {
    let catalog = catalog(&[(
        "calc",
        vec![
            tool("sum", "Calculate the sum of two numbers", &["a", "b"]),
            tool("schedule", "Schedule a meeting in the calendar", &["when"]),
        ],
    )]);
    let index = SearchIndex::build(&catalog);
    let hits = index.search("caculate a total", 10, |_| true);
    assert_eq!(names(&hits).first(), Some(&"calc__sum"), "{hits:?}");
    let hits = index.search("shedule a call with the team", 10, |_| true);
    assert_eq!(names(&hits).first(), Some(&"calc__schedule"), "{hits:?}");
    // Too short to guess, or nothing near: nothing.
    assert!(index.search("qzx", 10, |_| true).is_empty());
    assert!(index.search("xylophone", 10, |_| true).is_empty());
    assert_eq!(edit_distance(b"cacul", b"calcul", 1), Some(1));
    assert_eq!(edit_distance(b"caculat", b"calcul", 2), None, "three edits");
    assert_eq!(
        edit_distance(b"form", b"from", 1),
        Some(1),
        "a swap is one edit"
    );
    assert_eq!(edit_distance(b"abc", b"xyz", 2), None);
    assert_eq!(edit_distance(b"", b"ab", 2), Some(2));
}

/// A query in Chinese finds a tool described in Chinese though neither is spaced
/// into words: they share two-character pieces.
#[test]
fn finds_cjk_descriptions_by_cjk_queries() {
    let catalog = catalog(&[(
        "maps",
        vec![
            tool(
                "geo",
                "地理编码：将详细的结构化地址转换为经纬度坐标",
                &["address"],
            ),
            tool(
                "weather",
                "根据城市名称或者标准adcode查询指定城市的天气",
                &["city"],
            ),
        ],
    )]);
    let index = SearchIndex::build(&catalog);
    let hits = index.search("查询北京明天的天气", 10, |_| true);
    assert_eq!(names(&hits).first(), Some(&"maps__weather"), "{hits:?}");
    let hits = index.search("把这个地址转成坐标", 10, |_| true);
    assert_eq!(names(&hits).first(), Some(&"maps__geo"), "{hits:?}");
}

/// A small glossary carries common tool vocabulary across languages: English finds
/// a tool described in Chinese, Chinese and German find one described in English.
#[test]
fn finds_tools_across_languages() {
    let catalog = catalog(&[
        (
            "hot",
            vec![
                tool("realtime", "获取微博热搜榜", &[]),
                tool("daily", "获取知乎热榜", &[]),
            ],
        ),
        (
            "life",
            vec![
                tool("oil", "获取今日各省油价", &[]),
                tool("parcel", "查询快递物流信息", &["number"]),
            ],
        ),
        (
            "wx",
            vec![
                tool("forecast", "Get the weather forecast for a city", &["city"]),
                tool(
                    "alerts",
                    "Get active weather alerts for a state",
                    &["state"],
                ),
            ],
        ),
        (
            "fs",
            vec![
                tool("write_file", "Write text to a file on disk", &["path"]),
                tool(
                    "list_directory",
                    "List the entries of a directory",
                    &["path"],
                ),
            ],
        ),
    ]);
    let index = SearchIndex::build(&catalog);
    let hits = index.search("trending topics on weibo", 10, |_| true);
    assert_eq!(names(&hits).first(), Some(&"hot__realtime"), "{hits:?}");
    let hits = index.search("today's fuel prices", 10, |_| true);
    assert_eq!(names(&hits).first(), Some(&"life__oil"), "{hits:?}");
    let hits = index.search("track my parcel", 10, |_| true);
    assert_eq!(names(&hits).first(), Some(&"life__parcel"), "{hits:?}");
    let hits = index.search("明天北京天气预报", 10, |_| true);
    assert_eq!(names(&hits).first(), Some(&"wx__forecast"), "{hits:?}");
    let hits = index.search("Datei speichern", 10, |_| true);
    assert_eq!(names(&hits).first(), Some(&"fs__write_file"), "{hits:?}");
}

/// Abbreviations: from the built-in table (`k8s`, spelled with digits; `mr`, a
/// phrase), and those the catalog defines itself.
#[test]
fn abbreviations_stand_for_their_words() {
    let catalog = catalog(&[
        (
            "kube",
            vec![
                tool("delete_resource", "Delete a Kubernetes resource", &["name"]),
                tool("delete_file", "Delete a file", &["path"]),
            ],
        ),
        (
            "forge",
            vec![
                tool(
                    "create_merge_request",
                    "Open a new merge request",
                    &["title"],
                ),
                tool("create_branch", "Create a branch", &["name"]),
                tool(
                    "send_notice",
                    "Send a notice to a group over instant messaging",
                    &["group"],
                ),
                tool(
                    "chat_policy",
                    "The rules of instant messaging (IM) in the workspace",
                    &[],
                ),
            ],
        ),
    ]);
    let index = SearchIndex::build(&catalog);
    let hits = index.search("k8s: delete the stuck job", 10, |_| true);
    assert_eq!(
        names(&hits).first(),
        Some(&"kube__delete_resource"),
        "{hits:?}"
    );
    let hits = index.search("create an MR", 10, |_| true);
    assert_eq!(
        names(&hits).first(),
        Some(&"forge__create_merge_request"),
        "{hits:?}"
    );
    let hits = index.search("send an IM", 10, |_| true);
    assert_eq!(
        names(&hits).first(),
        Some(&"forge__send_notice"),
        "{hits:?}"
    );
}

/// A query naming a server ranks that server's matching tools first, but a server
/// named by a plain word does not win on that word alone.
#[test]
fn a_named_server_comes_first() {
    let catalog = catalog(&[
        (
            "notion",
            vec![
                tool("create_page", "Create a page", &["title"]),
                tool("search", "Search pages and databases", &["query"]),
            ],
        ),
        (
            "wiki",
            vec![tool("create_page", "Create a page in the wiki", &["title"])],
        ),
        (
            "line",
            vec![tool("broadcast", "Broadcast a message to followers", &[])],
        ),
        (
            "git",
            vec![
                tool(
                    "blame",
                    "Show who last changed each line of a file",
                    &["path"],
                ),
                tool("create_branch", "Create a local branch", &["name"]),
            ],
        ),
        (
            "gitlab",
            vec![tool(
                "create_branch",
                "Create a branch in a project",
                &["name"],
            )],
        ),
    ]);
    let index = SearchIndex::build(&catalog);
    let hits = index.search("create a page in notion", 10, |_| true);
    assert_eq!(
        names(&hits).first(),
        Some(&"notion__create_page"),
        "{hits:?}"
    );
    let hits = index.search("who changed this line of the file", 10, |_| true);
    assert_eq!(names(&hits).first(), Some(&"git__blame"), "{hits:?}");
    // A name written in mixed case is one word, not its parts (`GitLab`, not git).
    let hits = index.search("create a branch in GitLab", 10, |_| true);
    assert_eq!(
        names(&hits).first(),
        Some(&"gitlab__create_branch"),
        "{hits:?}"
    );
}

#[test]
fn name_matches_rank_first() {
    let index = SearchIndex::build(&sample());
    let hits = index.search("list open pull requests in a repository", 10, |_| true);
    assert_eq!(hits[0].name, "gh__pulls_list", "{hits:?}");
    let hits = index.search("add a label to an issue", 10, |_| true);
    assert_eq!(hits[0].name, "gh__issues_add-labels", "{hits:?}");
    let hits = index.search("refund a charge", 10, |_| true);
    assert_eq!(hits[0].name, "stripe__PostRefunds", "{hits:?}");
    assert_eq!(hits[0].upstream, "stripe");
    assert!(
        hits[0]
            .description
            .starts_with("When you create a new refund")
    );
    let hits = index.search("read a file from a repo", 10, |_| true);
    assert_eq!(hits[0].name, "gh__repos_get-content", "{hits:?}");
    // Synonyms: "new" finds create, "fetch" finds get/list.
    let hits = index.search("new customer", 10, |_| true);
    assert_eq!(hits[0].name, "stripe__PostCustomers", "{hits:?}");
    // Scores descend.
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
}

#[test]
fn exact_name_comes_first() {
    let index = SearchIndex::build(&sample());
    let hits = index.search("gh__issues_create", 5, |_| true);
    assert_eq!(hits[0].name, "gh__issues_create");
    let hits = index.search("GetCustomers", 5, |_| true);
    assert_eq!(hits[0].name, "stripe__GetCustomers");
}

#[test]
fn policy_filters_before_the_limit_and_does_not_influence_scores() {
    let index = SearchIndex::build(&sample());
    let only_stripe = |n: &str| n.starts_with("stripe__");
    let hits = index.search("create", 2, only_stripe);
    assert_eq!(hits.len(), 2, "{hits:?}");
    assert!(hits.iter().all(|h| h.upstream == "stripe"));

    // The same allowed tools score the same whatever else the catalog holds.
    let small = catalog(&[("stripe", stripe_tools())]);
    let alone = SearchIndex::build(&small).search("create a customer", 10, |_| true);
    let filtered = index.search("create a customer", 10, only_stripe);
    assert_eq!(alone, filtered);
    assert!(index.search("create", 10, |_| false).is_empty());
}

/// Words only hidden tools use teach the caller's search nothing: no abbreviation
/// learnt from them, no whole word read because of them, no typo taken for one.
#[test]
fn hidden_tools_teach_no_words() {
    let visible = || {
        vec![
            tool(
                "send_notice",
                "Send a notice over instant messaging",
                &["group"],
            ),
            tool("list_groups", "List the groups of the forge", &[]),
            tool("list_rules", "List the rules of a group", &["group"]),
        ]
    };
    let hidden = vec![
        tool("im_rules", "The rules of instant messaging (IM)", &[]),
        tool("im_policy", "The policy for instant messaging (IM)", &[]),
        tool("sync", "Sync the groups with GitLab", &[]),
        tool("grupos", "Grupos de la forja", &[]),
    ];
    let full = SearchIndex::build(&catalog(&[("pub", visible()), ("secret", hidden)]));
    let alone = SearchIndex::build(&catalog(&[("pub", visible())]));
    for query in [
        "send an IM",
        "GitLab groups",
        "list grupos",
        "list the rulse",
    ] {
        let expected = alone.search(query, 10, |_| true);
        let filtered = full.search(query, 10, |n| n.starts_with("pub__"));
        assert_eq!(expected, filtered, "{query}");
    }
}

#[test]
fn ties_break_by_name_and_limit_is_capped() {
    let tools: Vec<ToolDef> = (0..80)
        .rev()
        .map(|i| tool(&format!("tool{i:02}"), "Does the same thing.", &[]))
        .collect();
    let index = SearchIndex::build(&catalog(&[("u", tools)]));
    let hits = index.search("same thing", 1000, |_| true);
    assert_eq!(hits.len(), MAX_LIMIT);
    let mut sorted = names(&hits);
    sorted.sort();
    assert_eq!(names(&hits), sorted);
    assert_eq!(hits[0].name, "u__tool00");
    assert!(index.search("same", 0, |_| true).is_empty());
}

#[test]
fn odd_queries_do_not_panic() {
    let index = SearchIndex::build(&sample());
    assert!(index.search("", 10, |_| true).is_empty());
    assert!(index.search("   ", 10, |_| true).is_empty());
    assert!(index.search("the of a", 10, |_| true).is_empty());
    let _ = index.search("列出 pull requests ü ÉTÉ 🎉 İstanbul", 10, |_| true);
    let _ = index.search(&"é".repeat(100_000), 10, |_| true);
    let _ = index.search(&"pull ".repeat(100_000), 10, |_| true);
    let _ = index.search("<p>&amp;](", 10, |_| true);
    // Query expansion on odd input: abbreviations, mixed case, digits, glossary
    // words inside long unspaced runs.
    let _ = index.search("K8s GitLab MR PR i18n a11y x1Y2 (IM) aB", 10, |_| true);
    let _ = index.search(&"天气预报搜索".repeat(400), 10, |_| true);
    let _ = index.search(&"GitLabMongoDB ".repeat(400), 10, |_| true);
    // Unclosed markup in a huge description stays linear.
    let mut out = String::new();
    clean_text(&"<a".repeat(200_000), &mut out);
    clean_text(&"](x".repeat(200_000), &mut out);
    let empty = SearchIndex::build(&Catalog::default());
    assert!(empty.search("pull", 10, |_| true).is_empty());
    // Odd definitions index without panicking.
    // Parenthesised abbreviations of every odd shape index without panicking.
    let shapes = tool(
        "shapes",
        "( (A) (AB (ABCDEFG) é (ÉT) x (XY) Über Ärger (ÜÄ) points of interest (POIs) ()",
        &["p"],
    );
    let index = SearchIndex::build(&catalog(&[("u", vec![shapes])]));
    let _ = index.search("poi xy", 10, |_| true);
    let raw = json!({"name": "ÄÖÜ", "description": 42, "inputSchema": "nope", "title": ["x"]});
    let odd = ToolDef::from_raw(raw.as_object().unwrap().clone()).unwrap();
    let index = SearchIndex::build(&catalog(&[("ü", vec![odd])]));
    assert_eq!(index.len(), 1);
    let _ = index.search("äöü", 10, |_| true);
}

#[test]
fn my_means_the_authenticated_user() {
    let index = SearchIndex::build(&catalog(&[(
        "gh",
        vec![
            tool(
                "activity/list-notifications-for-authenticated-user",
                "List notifications for the authenticated user.",
                &[],
            ),
            tool(
                "activity/list-repo-notifications-for-authenticated-user",
                "List repository notifications for the authenticated user.",
                &["owner", "repo"],
            ),
            tool("users/get-by-username", "Get a user.", &["username"]),
        ],
    )]));
    let hits = index.search("list my notifications", 5, |_| true);
    assert_eq!(
        hits[0].name, "gh__activity_list-notifications-for-authenticated-user",
        "{hits:?}"
    );
}
