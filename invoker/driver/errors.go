package driver

// cliError names the CLI in the message of every error an Invoker or a
// Session returns ("codex: ..."); errors.Is and errors.As see through it.
type cliError struct {
	CLI string
	Err error
}

func (e *cliError) Error() string { return e.CLI + ": " + e.Err.Error() }

func (e *cliError) Unwrap() error { return e.Err }
