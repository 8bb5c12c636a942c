//! A `metrics` recorder that keeps the relay's claim times (`mensageria_claim_seconds`, one value
//! per claim of the free tipos) so that a section can read the claims of one run; every other
//! metric goes nowhere. Installed as the global recorder, once, by the sections that read it.

use std::sync::{Arc, Mutex, OnceLock};

use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};

/// The histogram the relay records each claim's duration in, in seconds.
const REIVINDICACAO: &str = "mensageria_claim_seconds";

/// The claim times recorded since the last [`colher`], in seconds.
#[derive(Default)]
struct Tempos(Mutex<Vec<f64>>);

impl HistogramFn for Tempos {
    fn record(&self, valor: f64) {
        self.0.lock().expect("claim times").push(valor);
    }
}

struct Gravador(Arc<Tempos>);

impl Recorder for Gravador {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, _: &Key, _: &Metadata<'_>) -> Counter {
        Counter::noop()
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, chave: &Key, _: &Metadata<'_>) -> Histogram {
        if chave.name() == REIVINDICACAO {
            Histogram::from_arc(Arc::clone(&self.0))
        } else {
            Histogram::noop()
        }
    }
}

static TEMPOS: OnceLock<Arc<Tempos>> = OnceLock::new();

/// Installs the recorder as the global one (the first call; later calls do nothing).
pub(crate) fn instalar() {
    TEMPOS.get_or_init(|| {
        let tempos = Arc::new(Tempos::default());
        metrics::set_global_recorder(Gravador(Arc::clone(&tempos)))
            .expect("no other metrics recorder in the bench");
        tempos
    });
}

/// The claim times recorded since the last call, in milliseconds, in the order they were
/// recorded; empty when [`instalar`] was never called.
pub(crate) fn colher() -> Vec<f64> {
    TEMPOS.get().map_or_else(Vec::new, |tempos| {
        std::mem::take(&mut *tempos.0.lock().expect("claim times"))
            .into_iter()
            .map(|s| s * 1000.0)
            .collect()
    })
}
