//! Query expansion: the other words a tool's text may use for what the caller wrote.
//!
//! Three built-in tables, all general vocabulary of agent tasks (never tuned to one
//! catalog):
//!
//! * related verbs and nouns (`list`/`get`/`fetch`, `image`/`picture`/`photo`), which
//!   count at a reduced weight;
//! * abbreviations and spellings of one thing (`repo`/`repository`, `k8s`/`kubernetes`,
//!   `pr` -> `pull request`), which count fully, and may stand for a phrase;
//! * a small glossary of the same vocabulary in Chinese, Japanese, German, Spanish and
//!   French, so a query in one language finds a tool described in another (`天气` ->
//!   `weather`, `weather` -> `天气`, `wetter` -> `weather`).
//!
//! Every word is stemmed the way the index stems, so table entries meet indexed terms.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::text::{is_cjk, stemmed};

/// Weight of a related word relative to the word the caller wrote.
const RELATED_WEIGHT: f64 = 0.5;
/// Weight of a translation: the meaning is the same, the wording is a guess.
const TRANSLATION_WEIGHT: f64 = 0.8;

/// One thing a query word may stand for: a term, or a phrase of terms (all stemmed).
pub(crate) struct Alternative {
    pub terms: Vec<String>,
    pub weight: f64,
}

pub(crate) struct Synonyms {
    /// Stemmed word -> what else it may be written as.
    map: HashMap<String, Vec<Alternative>>,
    /// Words that only stand for their alternatives (`my` -> `authenticated`).
    replace: Vec<String>,
    /// CJK glossary words (found inside a query's unspaced runs), longest first, with
    /// the stemmed English they stand for.
    cjk: Vec<(&'static str, Vec<String>)>,
}

impl Synonyms {
    pub(crate) fn of(&self, word: &str) -> &[Alternative] {
        self.map.get(word).map(Vec::as_slice).unwrap_or(&[])
    }

    pub(crate) fn drop_literal(&self, word: &str) -> bool {
        self.replace.iter().any(|w| w == word)
    }

    /// The glossary's English for the CJK words `text` contains, as (phrase, weight).
    /// A word inside a longer glossary word already found is not read again
    /// (`拉取请求` is a pull request, not also a bare request).
    pub(crate) fn translations_in(&self, text: &str) -> Vec<(&[String], f64)> {
        if !text.chars().any(is_cjk) {
            return Vec::new();
        }
        let mut found: Vec<(&[String], f64)> = Vec::new();
        let mut covered: Vec<&str> = Vec::new();
        for (word, english) in &self.cjk {
            if text.contains(word) && !covered.iter().any(|c| c.contains(word)) {
                covered.push(word);
                found.push((english.as_slice(), TRANSLATION_WEIGHT));
            }
        }
        found
    }
}

/// Stemmed terms of a phrase (`pull request` -> `pull`, `request`).
fn phrase(text: &str) -> Vec<String> {
    text.split_whitespace().map(stemmed).collect()
}

/// Verbs and nouns an agent uses interchangeably; each word brings the others at
/// [`RELATED_WEIGHT`].
const RELATED: &[&[&str]] = &[
    &[
        "get",
        "list",
        "fetch",
        "retrieve",
        "read",
        "show",
        "view",
        "display",
        "lookup",
        "find",
        "enumerate",
        "browse",
        "describe",
        "inspect",
    ],
    &[
        "create", "add", "new", "make", "insert", "register", "generate", "open", "post",
    ],
    &[
        "delete", "remove", "destroy", "erase", "drop", "discard", "purge", "unset", "wipe",
        "clear",
    ],
    &[
        "update",
        "edit",
        "modify",
        "change",
        "patch",
        "alter",
        "set",
        "rename",
        "replace",
        "configure",
        "adjust",
    ],
    &["search", "find", "query", "lookup", "filter", "locate"],
    &["cancel", "stop", "abort", "terminate", "halt"],
    &[
        "run", "trigger", "execute", "start", "launch", "dispatch", "invoke",
    ],
    &["send", "deliver", "email", "notify", "post"],
    &["file", "content"],
    &["copy", "clone", "duplicate"],
    &[
        "image",
        "picture",
        "photo",
        "screenshot",
        "snapshot",
        "capture",
    ],
    &["presentation", "slide", "deck", "powerpoint"],
    &["spreadsheet", "sheet", "excel", "workbook"],
    &["folder", "directory"],
    &["message", "chat", "dm", "conversation"],
    &["email", "mail", "inbox"],
    &["meeting", "event", "appointment", "calendar"],
    &["weather", "forecast", "temperature"],
    &["news", "headline"],
    &["trending", "trend", "hot", "popular"],
    &["map", "location", "place", "geocode", "address", "poi"],
    &["route", "direction", "navigate", "navigation"],
    &["translate", "translation"],
    &["stock", "ticker", "quote"],
    &["video", "movie", "clip"],
    &["transcript", "caption", "subtitle"],
    &["recipe", "dish", "meal", "cook"],
    &["hotel", "lodging", "accommodation", "rental", "apartment"],
    &["comment", "reply", "note"],
    &["user", "member", "people", "person", "account", "profile"],
    &["task", "todo", "ticket", "issue", "story"],
    &["document", "page", "note", "article", "wiki"],
    &["web", "internet", "online", "website", "site"],
    &["deploy", "release", "publish", "ship"],
    &["log", "trace"],
    &["error", "failure", "fail", "bug", "crash", "exception"],
    &["scale", "replica", "resize"],
    &["restart", "reboot", "rollout", "redeploy"],
    &["upload", "push"],
    &["download", "export", "save"],
    &["summary", "summarize", "overview"],
    &[
        "chart",
        "graph",
        "plot",
        "diagram",
        "visualize",
        "visualization",
    ],
    &["schema", "structure", "field", "column"],
    &["record", "row", "entry"],
    &["calculate", "compute", "evaluate", "math"],
    &["time", "date", "clock", "timezone"],
    &["click", "press", "tap"],
    &["write", "save", "store"],
    &["undo", "revert", "reset", "rollback"],
    &["monitor", "watch", "track", "observe"],
    &["notify", "alert", "remind", "reminder"],
    &["distance", "far"],
    &["mock", "fake", "stub", "dummy"],
    &["weather", "rain", "snow", "sunny", "wind"],
    &["recipe", "food", "eat", "dinner", "lunch", "breakfast"],
    &["lodging", "stay", "accommodation"],
    &["member", "teammate", "colleague", "coworker"],
    &["assign", "assignee", "owner"],
    &["decline", "reject", "refuse"],
    &["accept", "approve", "confirm"],
    &["snooze", "postpone", "delay", "defer"],
    &["elevation", "altitude", "height"],
    &["move", "transfer", "relocate"],
    &["rename", "move"],
    &["archive", "close"],
    &["broadcast", "announce"],
];

/// Abbreviations and spellings of one thing: full weight, both ways. The first entry of
/// a row may be a phrase, which its abbreviations stand for (`pull request` <- `pr`).
const SAME: &[&[&str]] = &[
    &["repository", "repo"],
    &["organization", "org", "organisation"],
    &["pull request", "pr"],
    &["merge request", "mr"],
    &["information", "info", "detail"],
    &["configuration", "config", "setting", "cfg"],
    &["authentication", "auth", "authorization"],
    &["application", "app"],
    &["environment", "env"],
    &["permission", "perm"],
    &["message", "msg"],
    &["document", "doc", "documentation"],
    &["subscription", "sub"],
    &["identifier", "id"],
    &["statistic", "stat"],
    &["delete", "del", "rm"],
    &["cancelled", "canceled"],
    &["color", "colour"],
    &["kubernetes", "k8s", "kube"],
    &["accessibility", "a11y"],
    &["internationalization", "i18n"],
    &["localization", "l10n"],
    &["observability", "o11y"],
    &["postgres", "pg", "postgresql", "psql"],
    &["database", "db"],
    &["image", "img"],
    &["picture", "pic"],
    &["presentation", "ppt", "pptx"],
    &["wikipedia", "wiki"],
    &["directory", "dir"],
    &["create directory", "mkdir"],
    &["list", "ls"],
    &["javascript", "js"],
    &["typescript", "ts"],
    &["python", "py"],
    &["markdown", "md"],
    &["url", "link"],
    &["direct message", "dm"],
    &["description", "desc"],
    &["address", "addr"],
    &["continuous integration", "ci"],
    &["travel time", "eta"],
    &["customer relationship", "crm"],
    &["virtual machine", "vm"],
    &["apartment", "apt"],
    &["calculate", "calc"],
    &["spreadsheet", "xlsx", "xls"],
    &["document", "docx"],
    &["portable document", "pdf"],
    &["question answer", "qa"],
    &["search engine optimization", "seo"],
    &["user interface", "ui"],
    &["command line", "cli"],
    &["secure shell", "ssh"],
    &["amount", "amt"],
    &["number", "num"],
    &["quantity", "qty"],
    &["message", "dm"],
];

/// Words that stand for another one, not the other way round: a file name in a query
/// (`notes.txt`, `budget.xlsx`) asks for a file, but a file is not a spreadsheet.
const IMPLIES: &[(&str, &str)] = &[
    ("txt", "file"),
    ("json", "file"),
    ("yaml", "file"),
    ("yml", "file"),
    ("toml", "file"),
    ("ini", "file"),
    ("csv", "file"),
    ("xlsx", "file"),
    ("docx", "file"),
    ("pdf", "file"),
    ("csv", "spreadsheet"),
];

/// Words standing for the caller themselves.
const SELF_WORDS: &[&str] = &["me", "my", "mine", "myself"];
const SELF_MEANS: &[&str] = &["authenticated", "current", "self"];

/// The same vocabulary in other languages: an English word or phrase, then what it is
/// in Chinese (simplified and traditional where they differ), Japanese, German,
/// Spanish and French. Words written in several scripts of one language are all listed.
const GLOSSARY: &[(&str, &[&str])] = &[
    // Actions.
    (
        "search",
        &[
            "搜索",
            "查找",
            "检索",
            "搜寻",
            "検索",
            "探す",
            "suchen",
            "buscar",
            "rechercher",
            "chercher",
        ],
    ),
    ("query", &["查询", "查詢", "照会", "abfragen", "consultar"]),
    (
        "find",
        &["找", "寻找", "見つけ", "finden", "encontrar", "trouver"],
    ),
    (
        "create",
        &[
            "创建",
            "新建",
            "建立",
            "創建",
            "作成",
            "erstellen",
            "anlegen",
            "crear",
            "créer",
        ],
    ),
    (
        "add",
        &[
            "添加",
            "增加",
            "新增",
            "追加",
            "hinzufügen",
            "agregar",
            "añadir",
            "ajouter",
        ],
    ),
    (
        "delete",
        &[
            "删除",
            "刪除",
            "移除",
            "削除",
            "löschen",
            "borrar",
            "eliminar",
            "supprimer",
        ],
    ),
    (
        "update",
        &[
            "更新",
            "修改",
            "编辑",
            "編集",
            "変更",
            "aktualisieren",
            "ändern",
            "actualizar",
            "modificar",
            "modifier",
        ],
    ),
    (
        "get",
        &["获取", "獲取", "取得", "abrufen", "obtener", "obtenir"],
    ),
    (
        "list",
        &["列出", "列表", "一覧", "清单", "liste", "lista", "listar"],
    ),
    (
        "show",
        &[
            "显示", "顯示", "查看", "表示", "anzeigen", "mostrar", "afficher",
        ],
    ),
    (
        "read",
        &["读取", "讀取", "阅读", "読み", "lesen", "leer", "lire"],
    ),
    (
        "write",
        &["写入", "寫入", "書き", "schreiben", "escribir", "écrire"],
    ),
    (
        "save",
        &["保存", "储存", "speichern", "guardar", "enregistrer"],
    ),
    (
        "send",
        &[
            "发送", "發送", "送信", "senden", "schicken", "enviar", "envoyer",
        ],
    ),
    (
        "open",
        &["打开", "打開", "開く", "öffnen", "abrir", "ouvrir"],
    ),
    (
        "close",
        &["关闭", "關閉", "閉じる", "schließen", "cerrar", "fermer"],
    ),
    (
        "click",
        &[
            "点击",
            "點擊",
            "クリック",
            "klicken",
            "hacer clic",
            "cliquer",
        ],
    ),
    (
        "move",
        &["移动", "移動", "verschieben", "mover", "déplacer"],
    ),
    (
        "copy",
        &["复制", "複製", "コピー", "kopieren", "copiar", "copier"],
    ),
    (
        "upload",
        &[
            "上传",
            "上傳",
            "アップロード",
            "hochladen",
            "subir",
            "téléverser",
        ],
    ),
    (
        "download",
        &[
            "下载",
            "下載",
            "ダウンロード",
            "herunterladen",
            "descargar",
            "télécharger",
        ],
    ),
    (
        "translate",
        &["翻译", "翻譯", "翻訳", "übersetzen", "traducir", "traduire"],
    ),
    (
        "summarize",
        &[
            "总结",
            "摘要",
            "概要",
            "要約",
            "zusammenfassen",
            "resumir",
            "résumer",
        ],
    ),
    (
        "run",
        &[
            "运行",
            "執行",
            "执行",
            "実行",
            "ausführen",
            "ejecutar",
            "exécuter",
        ],
    ),
    (
        "deploy",
        &[
            "部署",
            "发布",
            "デプロイ",
            "bereitstellen",
            "desplegar",
            "déployer",
        ],
    ),
    (
        "restart",
        &[
            "重启",
            "重啟",
            "再起動",
            "neustarten",
            "reiniciar",
            "redémarrer",
        ],
    ),
    ("stop", &["停止", "stoppen", "detener", "arrêter"]),
    (
        "merge",
        &[
            "合并",
            "合併",
            "マージ",
            "zusammenführen",
            "fusionar",
            "fusionner",
        ],
    ),
    ("commit", &["提交", "コミット"]),
    (
        "switch",
        &["切换", "切換", "切り替え", "wechseln", "cambiar"],
    ),
    (
        "undo",
        &[
            "撤销",
            "撤銷",
            "取り消し",
            "rückgängig",
            "deshacer",
            "annuler",
        ],
    ),
    (
        "check",
        &[
            "检查",
            "檢查",
            "确认",
            "確認",
            "prüfen",
            "comprobar",
            "vérifier",
        ],
    ),
    ("generate", &["生成", "generieren", "generar", "générer"]),
    (
        "draw",
        &["画", "畫", "描く", "zeichnen", "dibujar", "dessiner"],
    ),
    (
        "calculate",
        &["计算", "計算", "berechnen", "calcular", "calculer"],
    ),
    (
        "compare",
        &["比较", "比較", "vergleichen", "comparar", "comparer"],
    ),
    ("analyze", &["分析", "analysieren", "analizar", "analyser"]),
    (
        "monitor",
        &[
            "监控",
            "監控",
            "监视",
            "監視",
            "überwachen",
            "monitorear",
            "surveiller",
        ],
    ),
    (
        "recommend",
        &[
            "推荐",
            "推薦",
            "おすすめ",
            "empfehlen",
            "recomendar",
            "recommander",
        ],
    ),
    (
        "plan",
        &[
            "规划",
            "規劃",
            "计划",
            "計画",
            "planen",
            "planificar",
            "planifier",
        ],
    ),
    (
        "book",
        &[
            "预订",
            "預訂",
            "预约",
            "予約",
            "buchen",
            "reservar",
            "réserver",
        ],
    ),
    (
        "login",
        &[
            "登录",
            "登入",
            "ログイン",
            "anmelden",
            "iniciar sesión",
            "connexion",
        ],
    ),
    (
        "share",
        &["分享", "共享", "共有", "teilen", "compartir", "partager"],
    ),
    (
        "assign",
        &[
            "分配",
            "指派",
            "割り当て",
            "zuweisen",
            "asignar",
            "assigner",
        ],
    ),
    (
        "screenshot",
        &[
            "截图",
            "截圖",
            "截屏",
            "スクリーンショット",
            "bildschirmfoto",
            "captura de pantalla",
            "capture d'écran",
        ],
    ),
    // Things.
    (
        "file",
        &["文件", "檔案", "ファイル", "datei", "archivo", "fichier"],
    ),
    (
        "folder",
        &[
            "文件夹",
            "資料夾",
            "目录",
            "目錄",
            "フォルダ",
            "ordner",
            "verzeichnis",
            "carpeta",
            "dossier",
        ],
    ),
    (
        "page",
        &[
            "页面",
            "頁面",
            "网页",
            "網頁",
            "ページ",
            "seite",
            "página",
            "page",
        ],
    ),
    (
        "website",
        &[
            "网站",
            "網站",
            "ウェブサイト",
            "サイト",
            "webseite",
            "sitio web",
            "site web",
        ],
    ),
    (
        "browser",
        &["浏览器", "瀏覽器", "ブラウザ", "navegador", "navigateur"],
    ),
    (
        "button",
        &[
            "按钮",
            "按鈕",
            "ボタン",
            "knopf",
            "schaltfläche",
            "botón",
            "bouton",
        ],
    ),
    ("link", &["链接", "連結", "リンク", "enlace", "lien"]),
    (
        "image",
        &["图片", "圖片", "图像", "圖像", "画像", "bild", "imagen"],
    ),
    (
        "video",
        &["视频", "影片", "動画", "ビデオ", "vídeo", "vidéo"],
    ),
    (
        "transcript",
        &[
            "字幕",
            "文字稿",
            "文字起こし",
            "transkript",
            "transcripción",
            "sous-titres",
        ],
    ),
    (
        "document",
        &[
            "文档",
            "文檔",
            "ドキュメント",
            "文書",
            "dokument",
            "documento",
        ],
    ),
    (
        "table",
        &["表格", "テーブル", "tabelle", "tabla", "tableau"],
    ),
    (
        "spreadsheet",
        &[
            "电子表格",
            "試算表",
            "スプレッドシート",
            "hoja de cálculo",
            "tableur",
        ],
    ),
    ("sheet", &["工作表", "シート", "blatt", "hoja", "feuille"]),
    (
        "record",
        &[
            "记录",
            "記錄",
            "レコード",
            "datensatz",
            "registro",
            "enregistrement",
        ],
    ),
    (
        "database",
        &[
            "数据库",
            "資料庫",
            "データベース",
            "datenbank",
            "base de datos",
            "base de données",
        ],
    ),
    (
        "collection",
        &["集合", "コレクション", "sammlung", "colección"],
    ),
    (
        "data",
        &["数据", "資料", "データ", "daten", "datos", "données"],
    ),
    (
        "chart",
        &[
            "图表",
            "圖表",
            "グラフ",
            "チャート",
            "diagramm",
            "gráfico",
            "graphique",
        ],
    ),
    (
        "bar chart",
        &[
            "柱状图",
            "条形图",
            "棒グラフ",
            "balkendiagramm",
            "gráfico de barras",
        ],
    ),
    (
        "pie chart",
        &[
            "饼图",
            "餅圖",
            "円グラフ",
            "kreisdiagramm",
            "gráfico circular",
        ],
    ),
    (
        "line chart",
        &[
            "折线图",
            "折れ線グラフ",
            "liniendiagramm",
            "gráfico de líneas",
        ],
    ),
    (
        "scatter chart",
        &["散点图", "散布図", "streudiagramm", "gráfico de dispersión"],
    ),
    (
        "message",
        &["消息", "訊息", "メッセージ", "nachricht", "mensaje"],
    ),
    (
        "information",
        &["信息", "資訊", "情報", "informationen", "información"],
    ),
    (
        "email",
        &[
            "邮件",
            "郵件",
            "电子邮件",
            "メール",
            "e-mail",
            "correo",
            "courriel",
        ],
    ),
    (
        "chat",
        &["聊天", "群聊", "チャット", "conversación", "discussion"],
    ),
    (
        "group",
        &[
            "群组",
            "群組",
            "群",
            "グループ",
            "gruppe",
            "grupo",
            "groupe",
        ],
    ),
    ("channel", &["频道", "頻道", "チャンネル", "kanal", "canal"]),
    (
        "member",
        &["成员", "成員", "メンバー", "mitglied", "miembro", "membre"],
    ),
    (
        "user",
        &[
            "用户",
            "用戶",
            "ユーザー",
            "benutzer",
            "usuario",
            "utilisateur",
        ],
    ),
    (
        "comment",
        &[
            "评论",
            "評論",
            "コメント",
            "kommentar",
            "comentario",
            "commentaire",
        ],
    ),
    (
        "task",
        &["任务", "任務", "タスク", "aufgabe", "tarea", "tâche"],
    ),
    (
        "project",
        &[
            "项目",
            "項目",
            "プロジェクト",
            "projekt",
            "proyecto",
            "projet",
        ],
    ),
    ("issue", &["问题", "問題", "イシュー", "課題", "incidencia"]),
    ("card", &["卡片", "カード", "karte", "tarjeta"]),
    ("board", &["看板", "ボード", "tablero", "tableau"]),
    (
        "calendar",
        &[
            "日历",
            "日曆",
            "カレンダー",
            "kalender",
            "calendario",
            "calendrier",
        ],
    ),
    (
        "event",
        &[
            "事件",
            "活动",
            "日程",
            "イベント",
            "予定",
            "termin",
            "evento",
            "événement",
        ],
    ),
    (
        "meeting",
        &[
            "会议",
            "會議",
            "会議",
            "ミーティング",
            "besprechung",
            "reunión",
            "réunion",
        ],
    ),
    (
        "contact",
        &["联系人", "聯絡人", "連絡先", "kontakt", "contacto"],
    ),
    (
        "repository",
        &[
            "仓库",
            "倉庫",
            "代码库",
            "リポジトリ",
            "repositorio",
            "dépôt",
        ],
    ),
    ("branch", &["分支", "ブランチ", "zweig", "rama", "branche"]),
    ("pull request", &["拉取请求", "合并请求", "プルリクエスト"]),
    ("merge request", &["マージリクエスト"]),
    ("code", &["代码", "程式碼", "コード", "código"]),
    ("pipeline", &["流水线", "管線", "パイプライン"]),
    ("log", &["日志", "日誌", "ログ", "protokoll", "registro"]),
    (
        "function",
        &[
            "函数",
            "云函数",
            "函數",
            "関数",
            "funktion",
            "función",
            "fonction",
        ],
    ),
    ("cloud", &["云", "雲", "クラウド", "wolke", "nube", "nuage"]),
    (
        "server",
        &["服务器", "伺服器", "サーバー", "servidor", "serveur"],
    ),
    (
        "deployment",
        &[
            "部署",
            "デプロイメント",
            "bereitstellung",
            "despliegue",
            "déploiement",
        ],
    ),
    (
        "knowledge base",
        &[
            "知识库",
            "知識庫",
            "ナレッジベース",
            "wissensdatenbank",
            "base de conocimiento",
        ],
    ),
    ("wikipedia", &["维基百科", "維基百科", "ウィキペディア"]),
    (
        "encyclopedia",
        &[
            "百科",
            "百科全书",
            "百科事典",
            "enzyklopädie",
            "enciclopedia",
        ],
    ),
    ("article", &["文章", "記事", "artikel", "artículo"]),
    (
        "news",
        &[
            "新闻",
            "新聞",
            "资讯",
            "ニュース",
            "nachrichten",
            "noticias",
            "actualités",
        ],
    ),
    (
        "trending",
        &[
            "热搜",
            "熱搜",
            "热门",
            "熱門",
            "热榜",
            "热点",
            "トレンド",
            "angesagt",
            "tendencias",
            "tendances",
        ],
    ),
    ("hot", &["热", "熱", "人気"]),
    (
        "ranking",
        &[
            "排行",
            "排名",
            "榜单",
            "ランキング",
            "rangliste",
            "clasificación",
            "classement",
        ],
    ),
    (
        "weather",
        &["天气", "天氣", "天気", "wetter", "tiempo", "clima", "météo"],
    ),
    (
        "forecast",
        &[
            "预报",
            "預報",
            "予報",
            "vorhersage",
            "pronóstico",
            "prévisions",
        ],
    ),
    (
        "temperature",
        &["温度", "気温", "temperatur", "temperatura", "température"],
    ),
    ("map", &["地图", "地圖", "地図", "landkarte", "mapa"]),
    (
        "location",
        &[
            "位置",
            "地点",
            "地點",
            "場所",
            "standort",
            "ubicación",
            "emplacement",
        ],
    ),
    ("address", &["地址", "住所", "adresse", "dirección"]),
    (
        "coordinate",
        &[
            "坐标",
            "座標",
            "经纬度",
            "緯度経度",
            "koordinaten",
            "coordenadas",
            "coordonnées",
        ],
    ),
    (
        "route",
        &[
            "路线",
            "路線",
            "路径",
            "ルート",
            "経路",
            "ruta",
            "itinéraire",
        ],
    ),
    (
        "direction",
        &[
            "导航",
            "導航",
            "怎么走",
            "道順",
            "wegbeschreibung",
            "indicaciones",
        ],
    ),
    ("distance", &["距离", "距離", "entfernung", "distancia"]),
    (
        "driving",
        &["驾车", "駕車", "开车", "車で", "coche", "voiture"],
    ),
    ("walking", &["步行", "徒歩", "zu fuß", "a pie", "à pied"]),
    (
        "bicycling",
        &["骑行", "騎行", "自転車", "fahrrad", "bicicleta", "vélo"],
    ),
    (
        "transit",
        &[
            "公交",
            "公共交通",
            "地铁",
            "電車",
            "öpnv",
            "transporte público",
        ],
    ),
    (
        "nearby",
        &[
            "附近",
            "周边",
            "周邊",
            "周辺",
            "近く",
            "in der nähe",
            "cerca",
            "à proximité",
        ],
    ),
    (
        "restaurant",
        &["餐厅", "餐廳", "饭店", "レストラン", "restaurante"],
    ),
    ("hotel", &["酒店", "旅馆", "ホテル", "hotel"]),
    (
        "lodging",
        &[
            "民宿",
            "住宿",
            "宿泊",
            "unterkunft",
            "alojamiento",
            "hébergement",
        ],
    ),
    ("city", &["城市", "都市", "stadt", "ciudad", "ville"]),
    ("traffic", &["路况", "交通", "渋滞", "verkehr", "tráfico"]),
    (
        "recipe",
        &[
            "菜谱",
            "食谱",
            "食譜",
            "做法",
            "怎么做",
            "レシピ",
            "rezept",
            "receta",
            "recette",
        ],
    ),
    ("meal", &["饭", "菜", "料理", "mahlzeit", "comida", "repas"]),
    ("stock", &["股票", "股价", "株価", "aktie"]),
    (
        "price",
        &["价格", "價格", "価格", "preis", "precio", "prix"],
    ),
    (
        "exchange rate",
        &["汇率", "匯率", "為替", "wechselkurs", "tipo de cambio"],
    ),
    (
        "currency",
        &["货币", "貨幣", "通貨", "währung", "moneda", "devise"],
    ),
    ("time", &["时间", "時間", "zeit", "hora"]),
    ("date", &["日期", "日付", "datum", "fecha"]),
    (
        "timezone",
        &[
            "时区",
            "時區",
            "タイムゾーン",
            "zeitzone",
            "zona horaria",
            "fuseau horaire",
        ],
    ),
    (
        "music",
        &["音乐", "音樂", "音楽", "musik", "música", "musique"],
    ),
    ("song", &["歌曲", "歌", "lied", "canción", "chanson"]),
    ("movie", &["电影", "電影", "映画", "film", "película"]),
    ("book", &["书籍", "書籍", "图书", "buch", "libro", "livre"]),
    ("paper", &["论文", "論文", "paper"]),
    (
        "translation",
        &["翻译", "翻訳", "übersetzung", "traducción", "traduction"],
    ),
    (
        "password",
        &[
            "密码",
            "密碼",
            "パスワード",
            "passwort",
            "contraseña",
            "mot de passe",
        ],
    ),
    (
        "account",
        &[
            "账号",
            "帳號",
            "账户",
            "アカウント",
            "konto",
            "cuenta",
            "compte",
        ],
    ),
    (
        "order",
        &["订单", "訂單", "注文", "bestellung", "pedido", "commande"],
    ),
    (
        "product",
        &[
            "商品", "产品", "產品", "製品", "produkt", "producto", "produit",
        ],
    ),
    (
        "payment",
        &["支付", "付款", "支払い", "zahlung", "pago", "paiement"],
    ),
    (
        "invoice",
        &["发票", "發票", "請求書", "rechnung", "factura", "facture"],
    ),
    (
        "presentation",
        &[
            "演示文稿",
            "幻灯片",
            "簡報",
            "プレゼンテーション",
            "スライド",
            "präsentation",
            "presentación",
            "diaporama",
        ],
    ),
    ("note", &["笔记", "筆記", "メモ", "notiz", "nota"]),
    (
        "storage",
        &[
            "存储",
            "儲存",
            "ストレージ",
            "speicher",
            "almacenamiento",
            "stockage",
        ],
    ),
    (
        "permission",
        &["权限", "權限", "権限", "berechtigung", "permiso"],
    ),
    ("status", &["状态", "狀態", "状態", "estado", "statut"]),
    (
        "history",
        &["历史", "歷史", "履歴", "verlauf", "historial", "historique"],
    ),
    ("latest", &["最新", "最近", "neueste", "último", "dernier"]),
    (
        "detail",
        &[
            "详情",
            "詳情",
            "详细",
            "詳細",
            "einzelheiten",
            "detalles",
            "détails",
        ],
    ),
    (
        "parcel",
        &[
            "快递",
            "快遞",
            "包裹",
            "宅配便",
            "paket",
            "paquete",
            "colis",
        ],
    ),
    (
        "logistics",
        &["物流", "物流情報", "logistik", "logística", "logistique"],
    ),
    (
        "tracking",
        &[
            "跟踪",
            "追踪",
            "查件",
            "追跡",
            "sendungsverfolgung",
            "seguimiento",
            "suivi",
        ],
    ),
    (
        "flight",
        &["航班", "机票", "機票", "フライト", "flug", "vuelo", "vol"],
    ),
    (
        "train",
        &[
            "火车", "火車", "高铁", "列车", "電車", "列車", "zug", "tren",
        ],
    ),
    (
        "ticket",
        &["车票", "チケット", "fahrkarte", "billete", "billet"],
    ),
    (
        "attraction",
        &["景点", "景點", "観光地", "sehenswürdigkeit", "atracción"],
    ),
    (
        "travel",
        &["旅游", "旅遊", "旅行", "reise", "viaje", "voyage"],
    ),
    (
        "holiday",
        &[
            "节假日",
            "假期",
            "節假日",
            "祝日",
            "feiertag",
            "festivo",
            "férié",
        ],
    ),
    ("lunar calendar", &["农历", "農曆", "旧暦"]),
    (
        "horoscope",
        &[
            "星座",
            "运势",
            "運勢",
            "占い",
            "horoskop",
            "horóscopo",
            "horoscope",
        ],
    ),
    (
        "joke",
        &[
            "笑话",
            "笑話",
            "段子",
            "ジョーク",
            "witz",
            "chiste",
            "blague",
        ],
    ),
    (
        "poem",
        &[
            "诗词", "詩詞", "古诗", "诗", "詩", "gedicht", "poema", "poème",
        ],
    ),
    ("novel", &["小说", "小說", "小説", "novela"]),
    ("lyrics", &["歌词", "歌詞", "songtext", "letra"]),
    ("box office", &["票房", "興行収入"]),
    (
        "lottery",
        &["彩票", "宝くじ", "lotterie", "lotería", "loterie"],
    ),
    ("fuel price", &["油价", "油價", "ガソリン価格"]),
    (
        "air quality",
        &[
            "空气质量",
            "空氣品質",
            "空気質",
            "luftqualität",
            "calidad del aire",
            "qualité de l'air",
        ],
    ),
    ("earthquake", &["地震", "erdbeben", "terremoto", "séisme"]),
    (
        "phone",
        &[
            "手机",
            "手機",
            "电话",
            "電話",
            "telefon",
            "teléfono",
            "téléphone",
        ],
    ),
    ("sms", &["短信", "簡訊", "ショートメッセージ"]),
    ("qr code", &["二维码", "二維碼", "qrコード"]),
    ("short link", &["短链接", "短網址", "短縮url"]),
    (
        "wallpaper",
        &[
            "壁纸",
            "桌布",
            "壁紙",
            "hintergrundbild",
            "fondo de pantalla",
            "fond d'écran",
        ],
    ),
    (
        "scrape",
        &[
            "抓取",
            "爬取",
            "爬虫",
            "采集",
            "スクレイピング",
            "crawlen",
            "extraer",
        ],
    ),
    ("crawl", &["爬虫", "爬蟲", "クロール"]),
    ("like", &["点赞", "點讚", "いいね"]),
    (
        "follow",
        &["关注", "關注", "フォロー", "folgen", "seguir", "suivre"],
    ),
    ("follower", &["粉丝", "粉絲", "フォロワー"]),
    ("post", &["帖子", "发帖", "投稿", "beitrag", "publicación"]),
    (
        "topic",
        &["话题", "話題", "主题", "トピック", "thema", "tema", "sujet"],
    ),
    (
        "tag",
        &[
            "标签",
            "標籤",
            "タグ",
            "schlagwort",
            "etiqueta",
            "étiquette",
        ],
    ),
    (
        "category",
        &[
            "分类",
            "分類",
            "类别",
            "カテゴリ",
            "kategorie",
            "categoría",
            "catégorie",
        ],
    ),
    (
        "inventory",
        &[
            "库存",
            "庫存",
            "在庫",
            "lagerbestand",
            "inventario",
            "inventaire",
        ],
    ),
    (
        "refund",
        &[
            "退款",
            "返金",
            "rückerstattung",
            "reembolso",
            "remboursement",
        ],
    ),
    (
        "contract",
        &["合同", "合約", "契約", "vertrag", "contrato", "contrat"],
    ),
    (
        "approval",
        &[
            "审批",
            "審批",
            "承認",
            "genehmigung",
            "aprobación",
            "approbation",
        ],
    ),
    (
        "attendance",
        &[
            "考勤",
            "出勤",
            "勤怠",
            "anwesenheit",
            "asistencia",
            "présence",
        ],
    ),
    ("todo", &["待办", "待辦", "やること", "aufgaben"]),
    (
        "notification",
        &["通知", "提醒", "benachrichtigung", "notificación"],
    ),
    (
        "department",
        &["部门", "部門", "abteilung", "departamento", "département"],
    ),
    (
        "employee",
        &[
            "员工",
            "員工",
            "社員",
            "従業員",
            "mitarbeiter",
            "empleado",
            "employé",
        ],
    ),
    (
        "build",
        &["构建", "構建", "ビルド", "erstellen", "compilar"],
    ),
    (
        "container",
        &["容器", "コンテナ", "contenedor", "conteneur"],
    ),
    ("cluster", &["集群", "叢集", "クラスタ", "clúster"]),
    (
        "node",
        &["节点", "節點", "ノード", "knoten", "nodo", "nœud"],
    ),
    (
        "alert",
        &[
            "告警",
            "警报",
            "預警",
            "アラート",
            "warnung",
            "alerta",
            "alerte",
        ],
    ),
    (
        "metric",
        &[
            "指标",
            "指標",
            "メトリクス",
            "metrik",
            "métrica",
            "métrique",
        ],
    ),
    (
        "domain",
        &["域名", "網域", "ドメイン", "dominio", "domaine"],
    ),
    (
        "certificate",
        &[
            "证书",
            "證書",
            "証明書",
            "zertifikat",
            "certificado",
            "certificat",
        ],
    ),
    (
        "report",
        &[
            "报表",
            "报告",
            "報告",
            "レポート",
            "bericht",
            "informe",
            "rapport",
        ],
    ),
    (
        "humidity",
        &["湿度", "濕度", "luftfeuchtigkeit", "humedad", "humidité"],
    ),
    (
        "rain",
        &["下雨", "降雨", "降水", "雨", "regen", "lluvia", "pluie"],
    ),
    ("wind", &["风力", "风速", "風速", "wind", "viento", "vent"]),
    ("bot", &["机器人", "機器人", "ボット", "roboter", "robot"]),
    (
        "live stream",
        &["直播", "ライブ配信", "livestream", "transmisión en vivo"],
    ),
    ("video", &["短视频", "短影片"]),
    ("image", &["照片", "相片", "写真", "foto", "photo"]),
    ("question", &["问答", "提问", "質問", "frage", "pregunta"]),
    (
        "answer",
        &["回答", "答案", "antwort", "respuesta", "réponse"],
    ),
    (
        "knowledge",
        &["知识", "知識", "wissen", "conocimiento", "connaissance"],
    ),
    (
        "company",
        &[
            "公司",
            "企业",
            "企業",
            "会社",
            "unternehmen",
            "empresa",
            "entreprise",
        ],
    ),
    ("ip address", &["ip地址", "ipアドレス"]),
    ("population", &["人口", "bevölkerung", "población"]),
    ("exchange", &["兑换", "換算", "umrechnen"]),
    // The telling word of a phrase above, on its own: an English query names the
    // thing ("fuel prices") without the glossary's whole phrase.
    (
        "fuel",
        &[
            "油价",
            "油價",
            "汽油",
            "燃油",
            "ガソリン",
            "kraftstoff",
            "combustible",
            "carburant",
        ],
    ),
    ("air", &["空气", "空氣", "空気", "luft", "aire"]),
    ("qr", &["二维码", "二維碼"]),
    ("lunar", &["农历", "農曆", "旧暦"]),
    ("pie", &["饼图", "餅圖", "円グラフ"]),
    ("scatter", &["散点图", "散點圖", "散布図"]),
    ("histogram", &["直方图", "直方圖", "ヒストグラム"]),
    // Services better known by their local names.
    ("weibo", &["微博"]),
    ("zhihu", &["知乎"]),
    ("bilibili", &["哔哩哔哩", "嗶哩嗶哩", "b站"]),
    ("douyin", &["抖音"]),
    ("tiktok", &["抖音"]),
    ("xiaohongshu", &["小红书", "小紅書"]),
    ("wechat", &["微信"]),
    ("baidu", &["百度"]),
    ("douban", &["豆瓣"]),
    ("toutiao", &["头条", "今日头条"]),
    ("taobao", &["淘宝", "淘寶"]),
    ("amap", &["高德"]),
    ("lark", &["飞书", "飛書"]),
    ("feishu", &["飞书", "飛書"]),
    ("dingtalk", &["钉钉", "釘釘"]),
    ("github", &["ギットハブ"]),
];

pub(crate) fn synonyms() -> &'static Synonyms {
    static SYNONYMS: OnceLock<Synonyms> = OnceLock::new();
    SYNONYMS.get_or_init(build)
}

fn build() -> Synonyms {
    let mut map: HashMap<String, Vec<Alternative>> = HashMap::new();
    let mut link = |word: &str, terms: Vec<String>, weight: f64| {
        if terms.is_empty() || terms.len() == 1 && terms[0] == word {
            return;
        }
        let alts = map.entry(word.to_owned()).or_default();
        match alts.iter_mut().find(|a| a.terms == terms) {
            Some(slot) => slot.weight = slot.weight.max(weight),
            None => alts.push(Alternative { terms, weight }),
        }
    };
    for group in RELATED {
        for a in *group {
            for b in *group {
                link(&stemmed(a), vec![stemmed(b)], RELATED_WEIGHT);
            }
        }
    }
    for row in SAME {
        let full = phrase(row[0]);
        for short in &row[1..] {
            let short = stemmed(short);
            // The abbreviation stands for the whole phrase.
            link(&short, full.clone(), 1.0);
            // A lone word brings its abbreviations back; a phrase's first word alone
            // would be too loose a cue.
            if full.len() == 1 {
                link(&full[0], vec![short.clone()], 1.0);
            }
            for other in &row[1..] {
                link(&short, vec![stemmed(other)], 1.0);
            }
        }
    }
    for (word, implied) in IMPLIES {
        link(&stemmed(word), vec![stemmed(implied)], 1.0);
    }
    for a in SELF_WORDS {
        for b in SELF_MEANS {
            link(a, vec![stemmed(b)], 1.0);
        }
    }
    let mut cjk: Vec<(&'static str, Vec<String>)> = Vec::new();
    for (english, foreign) in GLOSSARY {
        let english_terms = phrase(english);
        for word in *foreign {
            if word.starts_with(is_cjk) {
                cjk.push((word, english_terms.clone()));
                // An English word finds a tool described in the other script (a
                // phrase's words are too loose on their own to stand for it).
                if english_terms.len() == 1 {
                    link(
                        &english_terms[0],
                        vec![word.to_lowercase()],
                        TRANSLATION_WEIGHT,
                    );
                }
            } else if !word.contains(' ') {
                link(&stemmed(word), english_terms.clone(), TRANSLATION_WEIGHT);
            }
        }
    }
    // Longest first, so a compound is read before the words inside it.
    cjk.sort_by(|a, b| {
        b.0.chars()
            .count()
            .cmp(&a.0.chars().count())
            .then(a.0.cmp(b.0))
    });
    Synonyms {
        map,
        replace: SELF_WORDS.iter().map(|w| w.to_string()).collect(),
        cjk,
    }
}
