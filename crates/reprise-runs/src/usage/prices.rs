//! Prices per million tokens, by model, each from a day on: the price of a reply is
//! the latest one of its model whose day is on or before the reply's.

use jiff::civil::Date;

/// What one model cost per million tokens from a day on.
#[derive(Clone, Debug, PartialEq)]
pub struct Price {
    /// The model, as recorded on the replies (`qwen2.5:7b`, `gpt-4o`).
    pub model: String,
    /// The first day it applies to (in the time zone the ledger is summed in).
    pub from: Date,
    /// Per million input tokens that were not read from the cache.
    pub input: f64,
    /// Per million output tokens.
    pub output: f64,
    /// Per million input tokens read from the server's cache; `None`: the input
    /// price.
    pub cached: Option<f64>,
}

/// What is wrong with a price.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PriceError {
    /// A price that is negative, infinite or not a number.
    #[error("{key} of {model} is {value}: a price is a number of at least 0")]
    BadAmount {
        /// The model.
        model: String,
        /// Which price (`input`, `output`, `cached`).
        key: &'static str,
        /// What was given.
        value: f64,
    },
    /// A price without a model.
    #[error("model is empty")]
    NoModel,
    /// Two prices of one model from the same day.
    #[error("{model} has two prices from {from}")]
    Duplicate {
        /// The model.
        model: String,
        /// The day.
        from: Date,
    },
}

/// Every known price.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PriceTable {
    prices: Vec<Price>,
}

impl Price {
    /// Checks the amounts and the model.
    pub fn check(&self) -> Result<(), PriceError> {
        if self.model.is_empty() {
            return Err(PriceError::NoModel);
        }
        let amounts = [
            ("input", Some(self.input)),
            ("output", Some(self.output)),
            ("cached", self.cached),
        ];
        for (key, value) in amounts {
            if let Some(value) = value
                && !(value.is_finite() && value >= 0.0)
            {
                return Err(PriceError::BadAmount {
                    model: self.model.clone(),
                    key,
                    value,
                });
            }
        }
        Ok(())
    }

    /// The cost of `input` tokens (of which `cached` read from the cache) and
    /// `output` tokens.
    pub fn cost(&self, input: u64, cached: u64, output: u64) -> f64 {
        let cached = cached.min(input);
        let fresh = (input - cached) as f64 * self.input;
        let cached = cached as f64 * self.cached.unwrap_or(self.input);
        (fresh + cached + output as f64 * self.output) / 1_000_000.0
    }
}

impl PriceTable {
    /// A table of `prices`, each checked; no two of one model from the same day.
    pub fn new(prices: Vec<Price>) -> Result<PriceTable, PriceError> {
        for (index, price) in prices.iter().enumerate() {
            price.check()?;
            if prices[..index]
                .iter()
                .any(|other| other.model == price.model && other.from == price.from)
            {
                return Err(PriceError::Duplicate {
                    model: price.model.clone(),
                    from: price.from,
                });
            }
        }
        Ok(PriceTable { prices })
    }

    /// Whether it holds no price.
    pub fn is_empty(&self) -> bool {
        self.prices.is_empty()
    }

    /// The price of `model` on `day`: the latest one from `day` or earlier.
    pub fn price_on(&self, model: &str, day: Date) -> Option<&Price> {
        self.prices
            .iter()
            .filter(|price| price.model == model && price.from <= day)
            .max_by_key(|price| price.from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn price(model: &str, from: Date, input: f64) -> Price {
        Price {
            model: model.to_owned(),
            from,
            input,
            output: 2.0 * input,
            cached: None,
        }
    }

    #[test]
    fn the_latest_price_on_or_before_the_day_applies() {
        let table = PriceTable::new(vec![
            price("m", jiff::civil::date(2026, 1, 1), 1.0),
            price("m", jiff::civil::date(2026, 6, 1), 3.0),
            price("other", jiff::civil::date(2025, 1, 1), 9.0),
        ])
        .unwrap();
        let on = |y, m, d| {
            table
                .price_on("m", jiff::civil::date(y, m, d))
                .map(|p| p.input)
        };
        assert_eq!(on(2025, 12, 31), None);
        assert_eq!(on(2026, 1, 1), Some(1.0));
        assert_eq!(on(2026, 5, 31), Some(1.0));
        assert_eq!(on(2026, 6, 1), Some(3.0));
        assert_eq!(table.price_on("nope", jiff::civil::date(2027, 1, 1)), None);
    }

    #[test]
    fn cached_tokens_cost_the_cached_price_and_default_to_the_input_price() {
        let mut p = price("m", jiff::civil::date(2026, 1, 1), 2.0);
        assert_eq!(p.cost(1_000_000, 500_000, 1_000_000), 2.0 + 4.0);
        p.cached = Some(0.5);
        assert_eq!(p.cost(1_000_000, 500_000, 0), 1.0 + 0.25);
    }

    #[test]
    fn bad_prices_are_refused_by_name() {
        let mut p = price("m", jiff::civil::date(2026, 1, 1), 1.0);
        p.output = -1.0;
        let error = PriceTable::new(vec![p]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "output of m is -1: a price is a number of at least 0"
        );
        let twice = vec![
            price("m", jiff::civil::date(2026, 1, 1), 1.0),
            price("m", jiff::civil::date(2026, 1, 1), 2.0),
        ];
        assert!(matches!(
            PriceTable::new(twice),
            Err(PriceError::Duplicate { .. })
        ));
    }
}
