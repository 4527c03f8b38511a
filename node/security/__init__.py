"""Security of the node's listeners: authentication (SASL PLAIN and SCRAM, TLS client certificates),
the authorizer over the committed ACLs (Kafka's StandardAuthorizer semantics), and which operation
each API needs. Decisions are pure; sockets and TLS stay in node.protocol and node.server."""
