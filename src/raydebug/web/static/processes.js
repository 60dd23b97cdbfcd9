// Processes and merged stacks: filled in by the live-processes views.
export class Processes {
  constructor(app) {
    this.app = app;
  }

  start() {}

  stop() {}
}
