//! The current image and the subscribers told of each change (Kafka's
//! `MetadataPublisher`s). Readers take the current `Arc<MetadataImage>`
//! without waiting for the writer; the writer publishes each committed
//! image with its delta, and every subscriber is called with both, in
//! commit order.

use std::ops::Deref;
use std::sync::{Arc, Mutex, RwLock};

use crate::delta::MetadataDelta;
use crate::image::MetadataImage;

/// A committed image and what it changed against the one before.
#[derive(Clone, Debug)]
pub struct MetadataUpdate {
    pub image: Arc<MetadataImage>,
    pub delta: Arc<MetadataDelta>,
}

impl MetadataUpdate {
    /// Nothing changed: `image` again, with an empty delta.
    pub fn unchanged(image: Arc<MetadataImage>) -> Self {
        MetadataUpdate { image, delta: Arc::default() }
    }
}

/// An update is read as its image (what callers look topics up in); the
/// delta is there for those who act on the change.
impl Deref for MetadataUpdate {
    type Target = MetadataImage;

    fn deref(&self) -> &MetadataImage {
        &self.image
    }
}

type Subscriber = Box<dyn Fn(&MetadataUpdate) + Send + Sync>;

pub struct MetadataPublisher {
    current: RwLock<Arc<MetadataImage>>,
    /// Held while publishing, so subscribers see updates one at a time and in order.
    subscribers: Mutex<Vec<Subscriber>>,
}

impl MetadataPublisher {
    pub fn new(image: Arc<MetadataImage>) -> Self {
        debug_assert!(image.is_consistent(), "an inconsistent image");
        MetadataPublisher { current: RwLock::new(image), subscribers: Mutex::new(Vec::new()) }
    }

    /// The current image: cheap, never waits for the writer.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.current.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Adds a subscriber, which is told at once of the current image as a
    /// delta from the empty one (so it misses nothing), then of every update.
    pub fn subscribe(&self, subscriber: impl Fn(&MetadataUpdate) + Send + Sync + 'static) {
        let mut subscribers = self.subscribers.lock().unwrap_or_else(|e| e.into_inner());
        let image = self.image();
        let delta = Arc::new(MetadataDelta::from_empty(&image));
        subscriber(&MetadataUpdate { image, delta });
        subscribers.push(Box::new(subscriber));
    }

    /// Adds a subscriber that has its own way of catching up: `catch_up`
    /// gets the current image first (no update is published meanwhile), and
    /// only if it succeeds is `subscriber` told of every later update. For a
    /// subscriber whose start must stop on an error instead of logging it,
    /// and that would otherwise apply the whole image twice.
    pub fn subscribe_after<E>(
        &self,
        catch_up: impl FnOnce(&MetadataImage) -> Result<(), E>,
        subscriber: impl Fn(&MetadataUpdate) + Send + Sync + 'static,
    ) -> Result<(), E> {
        let mut subscribers = self.subscribers.lock().unwrap_or_else(|e| e.into_inner());
        catch_up(&self.image())?;
        subscribers.push(Box::new(subscriber));
        Ok(())
    }

    /// Runs `look` on the current image with no update published
    /// meanwhile, so that what it does is not undone by, nor undoes, an
    /// update: for a subscriber that must go over the whole image again.
    pub fn with_current<R>(&self, look: impl FnOnce(&MetadataImage) -> R) -> R {
        let _subscribers = self.subscribers.lock().unwrap_or_else(|e| e.into_inner());
        look(&self.image())
    }

    /// Makes `update` the current image, then tells every subscriber.
    pub fn publish(&self, update: &MetadataUpdate) {
        let subscribers = self.subscribers.lock().unwrap_or_else(|e| e.into_inner());
        {
            let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
            // The image only moves forward through the log.
            debug_assert!(update.image.offset >= current.offset, "an image older than the current one");
            debug_assert!(update.image.is_consistent(), "an inconsistent image");
            *current = update.image.clone();
        }
        for subscriber in subscribers.iter() {
            subscriber(update);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::MetadataRecord;
    use krabka_protocol::{TopicRecord, Uuid};

    #[test]
    fn subscribers_learn_the_current_image_then_each_change_in_order() {
        let mut start = MetadataImage::default();
        let a = MetadataRecord::Topic(TopicRecord { name: "a".into(), topic_id: Uuid([1; 16]), ..Default::default() });
        start.apply(&a).unwrap();
        start.offset = 0;
        let publisher = MetadataPublisher::new(Arc::new(start));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        publisher.subscribe(move |update| {
            let created: Vec<String> = update.delta.created_topics.values().cloned().collect();
            log.lock().unwrap().push((update.image.offset, created));
        });

        let mut next = (*publisher.image()).clone();
        let mut delta = MetadataDelta::default();
        let b = MetadataRecord::Topic(TopicRecord { name: "b".into(), topic_id: Uuid([2; 16]), ..Default::default() });
        delta.apply(&mut next, &b).unwrap();
        next.offset = 1;
        let update = MetadataUpdate { image: Arc::new(next), delta: Arc::new(delta) };
        publisher.publish(&update);

        assert_eq!(publisher.image().offset, 1);
        assert!(publisher.image().topic("b").is_some());
        // Read as its image.
        assert!(update.topic("a").is_some());
        let seen = seen.lock().unwrap();
        assert_eq!(*seen, [(0, vec!["a".to_string()]), (1, vec!["b".to_string()])]);
    }

    #[test]
    fn a_subscriber_that_catches_up_itself_sees_only_later_updates() {
        let publisher = MetadataPublisher::new(Arc::new(MetadataImage::default()));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let failed: Result<(), &str> = publisher.subscribe_after(|_| Err("cannot open"), |_| unreachable!());
        assert_eq!(failed, Err("cannot open"));
        let log = seen.clone();
        let caught_up = Arc::new(Mutex::new(None));
        let start = caught_up.clone();
        publisher
            .subscribe_after::<()>(
                move |image| {
                    *start.lock().unwrap() = Some(image.offset);
                    Ok(())
                },
                move |update| log.lock().unwrap().push(update.image.offset),
            )
            .unwrap();
        let mut next = (*publisher.image()).clone();
        next.offset = 5;
        publisher.publish(&MetadataUpdate::unchanged(Arc::new(next)));
        assert_eq!(*caught_up.lock().unwrap(), Some(MetadataImage::default().offset));
        // Only the later update, and the failed subscriber was never added.
        assert_eq!(*seen.lock().unwrap(), [5]);
    }
}
