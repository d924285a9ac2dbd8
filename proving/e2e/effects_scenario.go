package e2e

import (
	"database/sql"
	"fmt"
	"time"
)

// failCommitsSQL makes every commit of a transaction that wrote to the
// outbox fail (a deferred trigger: after the outbox write, before the
// commit) while outbox_fail holds a row, as a serialization failure at
// commit does (retried: transient), and counts the failures in a sequence,
// which a rollback does not undo.
const failCommitsSQL = `
	CREATE TABLE IF NOT EXISTS outbox_fail (on_ BOOLEAN);
	CREATE SEQUENCE IF NOT EXISTS outbox_fail_count;
	CREATE OR REPLACE FUNCTION outbox_fail() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		IF EXISTS (SELECT 1 FROM outbox_fail) THEN
			PERFORM nextval('outbox_fail_count');
			RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'injected: the commit fails after the outbox write';
		END IF;
		RETURN NULL;
	END $$;
	DROP TRIGGER IF EXISTS outbox_fail ON outbox;
	CREATE CONSTRAINT TRIGGER outbox_fail AFTER INSERT OR UPDATE ON outbox DEFERRABLE INITIALLY DEFERRED
		FOR EACH ROW EXECUTE FUNCTION outbox_fail();`

// effectsRollbackScenario fails every commit that wrote to the outbox for
// 8 s while events flow: the records are retried and commit after; what
// the topics hold must all have committed (the audit: 0 ghosts), and every
// notification and payload status committed must be there (0 lost).
func effectsRollbackScenario() Scenario {
	return Scenario{Name: "effects-rollback", Events: 4000, Hosts: 1000, Listeners: 1, NoDeadLetters: true, Faults: []Fault{
		{0.2, "fail every commit after its outbox write for 8 s", func(r *run) error {
			db, err := sql.Open("postgres", r.dbURL)
			if err != nil {
				return err
			}
			defer db.Close()
			if _, err := db.Exec(failCommitsSQL); err != nil {
				return err
			}
			if _, err := db.Exec(`INSERT INTO outbox_fail VALUES (true)`); err != nil {
				return err
			}
			r.wait(8 * time.Second)
			if _, err := db.Exec(`DELETE FROM outbox_fail`); err != nil {
				return err
			}
			var failed int64
			if err := db.QueryRow(`SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM outbox_fail_count`).Scan(&failed); err != nil {
				return err
			}
			if failed == 0 {
				return fmt.Errorf("no commit failed: the fault did not fire")
			}
			r.note(fmt.Sprintf("%d commits failed after their outbox write", failed))
			return nil
		}},
	}}
}
