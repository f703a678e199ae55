const client = new OpenAI({ apiKey: 'sk-proj-4fG7hJ2kL9mN3pQ8rS1tV6wX0yZ5aB' });
