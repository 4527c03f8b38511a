"""The metadata checker: Kafka's metadata records decoded with Kafka's schemas (`decode`), replayed
into the checker's own image with KIP-631's rules (`model`), and judged over a run's journals
(`check`): every committed record keeps the rules, and every node's image equals the replay."""
