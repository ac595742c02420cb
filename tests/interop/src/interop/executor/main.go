// A small executor on mesos-go's v1 executor library (lib/executor, its calls and config,
// and the httpexec sender), as Debian ships it. It reads its agent from the MESOS_*
// environment, subscribes, runs the task it is given until it is killed, and appends one
// line per step to the file $INTEROP_REPORT for tests/interop.rs to check. The codec is
// $INTEROP_CODEC (protobuf or json).
package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"time"

	mesos "github.com/mesos/mesos-go/api/v1/lib"
	"github.com/mesos/mesos-go/api/v1/lib/encoding"
	"github.com/mesos/mesos-go/api/v1/lib/encoding/codecs"
	"github.com/mesos/mesos-go/api/v1/lib/executor"
	"github.com/mesos/mesos-go/api/v1/lib/executor/calls"
	"github.com/mesos/mesos-go/api/v1/lib/executor/config"
	"github.com/mesos/mesos-go/api/v1/lib/httpcli"
	"github.com/mesos/mesos-go/api/v1/lib/httpcli/httpexec"
	"github.com/pborman/uuid"
)

var reportFile *os.File

func report(format string, args ...interface{}) {
	fmt.Fprintf(reportFile, format+"\n", args...)
	reportFile.Sync()
}

func fail(format string, args ...interface{}) {
	report("FAIL "+format, args...)
	os.Exit(1)
}

func main() {
	var err error
	reportFile, err = os.OpenFile(os.Getenv("INTEROP_REPORT"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "report file:", err)
		os.Exit(2)
	}
	cfg, err := config.FromEnv()
	if err != nil {
		fail("environment: %v", err)
	}
	codec, ok := map[string]encoding.MediaType{"protobuf": codecs.MediaTypeProtobuf, "json": codecs.MediaTypeJSON}[os.Getenv("INTEROP_CODEC")]
	if !ok {
		fail("unknown codec %q", os.Getenv("INTEROP_CODEC"))
	}
	report("config executor=%s checkpoint=%v grace=%v", cfg.ExecutorID, cfg.Checkpoint, cfg.ExecutorShutdownGracePeriod)
	api := url.URL{Scheme: "http", Host: cfg.AgentEndpoint, Path: "/api/v1/executor"}
	cli := httpcli.New(
		httpcli.Endpoint(api.String()),
		httpcli.Codec(codecs.ByMediaType[codec]),
		httpcli.Do(httpcli.With(httpcli.Timeout(5*time.Second))),
	)
	sender := calls.SenderWith(httpexec.NewSender(cli.Send), calls.Framework(cfg.FrameworkID), calls.Executor(cfg.ExecutorID))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	send := func(what string, c *executor.Call) {
		if err := calls.SendNoData(ctx, sender, calls.NonStreaming(c)); err != nil {
			fail("%s: %v", what, err)
		}
	}

	resp, err := sender.Send(ctx, calls.NonStreaming(calls.Subscribe(nil, nil)))
	if err != nil {
		fail("subscribe: %v", err)
	}
	defer resp.Close()
	var agent mesos.AgentID
	update := func(task mesos.TaskID, state mesos.TaskState) {
		send("update", calls.Update(mesos.TaskStatus{
			TaskID:     task,
			State:      state.Enum(),
			Source:     mesos.SOURCE_EXECUTOR.Enum(),
			ExecutorID: &mesos.ExecutorID{Value: cfg.ExecutorID},
			AgentID:    &agent,
			UUID:       []byte(uuid.NewRandom()),
		}))
		report("sent %s %s", task.Value, state)
	}
	for {
		var e executor.Event
		if err := resp.Decode(&e); err != nil {
			fail("event stream: %v", err)
		}
		switch e.GetType() {
		case executor.Event_SUBSCRIBED:
			s := e.GetSubscribed()
			if id := s.AgentInfo.GetID(); id != nil {
				agent = *id
			}
			report("subscribed agent=%s framework=%s", s.AgentInfo.Hostname, s.FrameworkInfo.Name)
			send("message", calls.Message([]byte("hello from "+cfg.ExecutorID)))
		case executor.Event_LAUNCH:
			t := e.GetLaunch().Task
			report("launch %s", t.TaskID.Value)
			update(t.TaskID, mesos.TASK_RUNNING)
		case executor.Event_ACKNOWLEDGED:
			a := e.GetAcknowledged()
			report("acknowledged %s", a.TaskID.Value)
		case executor.Event_KILL:
			k := e.GetKill()
			report("kill %s", k.TaskID.Value)
			update(k.TaskID, mesos.TASK_KILLED)
		case executor.Event_SHUTDOWN:
			report("shutdown")
			return
		case executor.Event_ERROR:
			fail("error event: %s", e.GetError().Message)
		default:
			report("event %s", e.GetType())
		}
	}
}
