const FIELDS: Record<string, string> = { apiKey: 'API_KEY', authToken: 'AUTH_TOKEN' };
