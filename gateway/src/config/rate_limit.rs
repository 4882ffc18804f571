//! A tenant's rate limit: one window (second, minute or hour) by construction, checked
//! while the file is parsed, so the rate is known to be valid wherever it is read.

use std::num::NonZeroU32;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A token bucket per tenant: `count` requests per `window`, `burst` at once (default:
/// the count). Written in the file as exactly one of `per_second`, `per_minute` or
/// `per_hour`, and optionally `burst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RateLimitFile", into = "RateLimitFile")]
pub struct RateLimitConfig {
    pub window: RateWindow,
    pub count: NonZeroU32,
    pub burst: Option<NonZeroU32>,
}

/// The window a rate limit's count is given for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateWindow {
    Second,
    Minute,
    Hour,
}

impl RateWindow {
    pub fn duration(self) -> Duration {
        match self {
            RateWindow::Second => Duration::from_secs(1),
            RateWindow::Minute => Duration::from_secs(60),
            RateWindow::Hour => Duration::from_secs(3600),
        }
    }

    /// The key in the file: `per_second`, `per_minute` or `per_hour`.
    pub fn field(self) -> &'static str {
        match self {
            RateWindow::Second => "per_second",
            RateWindow::Minute => "per_minute",
            RateWindow::Hour => "per_hour",
        }
    }
}

/// A validated rate: `count` requests per `window`, `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub count: u32,
    pub window: Duration,
    pub burst: u32,
}

impl Rate {
    /// Time between two requests at the sustained rate (one token's refill).
    pub fn emission_interval(&self) -> Duration {
        self.window / self.count.max(1)
    }

    /// This rate shared out over `replicas` processes (each gets its share of the count
    /// and of the burst, at least 1).
    pub fn divided(&self, replicas: u32) -> Rate {
        let replicas = replicas.max(1);
        Rate {
            count: self.count.div_ceil(replicas).max(1),
            window: self.window,
            burst: self.burst.div_ceil(replicas).max(1),
        }
    }
}

impl RateLimitConfig {
    /// The rate this limit allows.
    pub fn rate(&self) -> Rate {
        Rate {
            count: self.count.get(),
            window: self.window.duration(),
            burst: self.burst.unwrap_or(self.count).get(),
        }
    }
}

/// A token bucket per tenant: set exactly one of `per_second`, `per_minute` or
/// `per_hour` (the sustained rate), and optionally `burst` (requests accepted at once;
/// default: the rate's count). `{per_hour: 20, burst: 20}` is "20 per hour".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "RateLimitConfig")]
struct RateLimitFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    per_second: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    per_minute: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    per_hour: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    burst: Option<u32>,
}

impl TryFrom<RateLimitFile> for RateLimitConfig {
    type Error = String;

    fn try_from(file: RateLimitFile) -> Result<Self, String> {
        let (count, window) = super::one_of::exactly_one(
            [
                file.per_second.map(|c| (c, RateWindow::Second)),
                file.per_minute.map(|c| (c, RateWindow::Minute)),
                file.per_hour.map(|c| (c, RateWindow::Hour)),
            ],
            &["per_second", "per_minute", "per_hour"],
        )?;
        let Some(count) = NonZeroU32::new(count) else {
            return Err(format!("`{}` must be at least 1", window.field()));
        };
        let burst = match file.burst {
            None => None,
            Some(burst) => {
                Some(NonZeroU32::new(burst).ok_or("`burst` must be at least 1".to_owned())?)
            }
        };
        Ok(RateLimitConfig {
            window,
            count,
            burst,
        })
    }
}

impl From<RateLimitConfig> for RateLimitFile {
    fn from(limit: RateLimitConfig) -> Self {
        let count = Some(limit.count.get());
        let mut file = RateLimitFile {
            per_second: None,
            per_minute: None,
            per_hour: None,
            burst: limit.burst.map(NonZeroU32::get),
        };
        match limit.window {
            RateWindow::Second => file.per_second = count,
            RateWindow::Minute => file.per_minute = count,
            RateWindow::Hour => file.per_hour = count,
        }
        file
    }
}

super::one_of::schema_of_file_shape!(RateLimitConfig, RateLimitFile);
