package consumer

import (
	"errors"

	"github.com/IBM/sarama"
)

// member is one consumer-group member on a client of its own, kept so that
// actors.RunMember can refresh the group's coordinator after a failed
// session (actors.CoordinatorRefresher): sarama's group keeps a coordinator
// that died at the network level cached, and would rejoin against it.
type member struct {
	sarama.ConsumerGroup
	client sarama.Client
	group  string
}

func newMember(brokers []string, group string, cfg *sarama.Config) (*member, error) {
	client, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		return nil, err
	}
	g, err := sarama.NewConsumerGroupFromClient(group, client)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	return &member{ConsumerGroup: g, client: client, group: group}, nil
}

// RefreshCoordinator asks a live broker which node coordinates the group.
func (m *member) RefreshCoordinator() error { return m.client.RefreshCoordinator(m.group) }

// Close leaves the group, then closes the client the group does not own.
// Closing again reports the group closed, as sarama's own group does.
func (m *member) Close() error {
	err := m.ConsumerGroup.Close()
	if cerr := m.client.Close(); cerr != nil && !errors.Is(cerr, sarama.ErrClosedClient) && err == nil {
		err = cerr
	}
	return err
}
