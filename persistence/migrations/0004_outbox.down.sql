DROP TABLE advisory_notified, remediation_state, outbox;
